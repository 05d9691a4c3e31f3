# The mean of the last WINDOW test games that ended by the time the agent steps reached
# each of STEPS (comma-separated), from a run's status lines (out.log, the first file)
# and its game log (the second); "-" for a count the run did not reach.
#
# Usage: awk -F', ' -v steps=500000,1000000 -v window=100 -f benches/means_at_steps.awk out.log GAME_LOG
function seconds_of(clock,   t) { split(clock, t, /[hms] */); return t[1] * 3600 + t[2] * 60 + t[3] }
FILENAME ~ /out\.log$/ {
    if ($1 ~ /^\[.*\] agent steps /) {
        split(substr($1, 2), s, /\] agent steps /); status_time[++statuses] = seconds_of(s[1]); status_steps[statuses] = s[2] + 0
    }
    next
}
/^Time / {
    sub(/^Time /, "", $1); game_time[++games] = seconds_of($1)
    split($2, r, " "); game_reward[games] = r[3] + 0
}
END {
    count = split(steps, goal, ",")
    for (g = 1; g <= count; g++) {
        # When the counter first reached the goal; a run that never did gets "-".
        reached = -1
        for (i = 1; i <= statuses; i++) if (status_steps[i] >= goal[g] + 0) { reached = status_time[i]; break }
        if (reached < 0) { out = out (g > 1 ? " / " : "") "-"; continue }
        sum = 0; k = 0
        for (i = games; i >= 1 && k < window; i--) if (game_time[i] <= reached) { sum += game_reward[i]; k++ }
        out = out (g > 1 ? " / " : "") (k ? sprintf("%.1f", sum / k) : "-")
    }
    print out
}
