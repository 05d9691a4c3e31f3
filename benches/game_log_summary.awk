# Summarises one training run for the benches: its status lines (out.log, the first
# file) give the agent steps over time, its game log (the second) the test games.
# Prints "first GOAL+ at T after S agent steps; best B; last N games mean M; G games",
# where S is the agent steps of the last status line before that game ended and N is
# at most WINDOW.
#
# Usage: awk -F', ' -v goal=18 -v window=10 -f benches/game_log_summary.awk out.log GAME_LOG
function seconds_of(clock,   t) { split(clock, t, /[hms] */); return t[1] * 3600 + t[2] * 60 + t[3] }
FILENAME ~ /out\.log$/ {
    if ($1 ~ /^\[.*\] agent steps /) {
        split(substr($1, 2), s, /\] agent steps /); status_time[++statuses] = seconds_of(s[1]); status_steps[statuses] = s[2]
    }
    next
}
/^Time / {
    sub(/^Time /, "", $1); seconds = seconds_of($1)
    split($2, r, " "); reward = r[3] + 0; last[n % window] = reward; n++
    if (n == 1 || reward > best) best = reward
    if (first == "" && reward >= goal) {
        first = sprintf("%dm %02ds", seconds / 60, seconds % 60); steps = 0
        for (i = 1; i <= statuses && status_time[i] <= seconds; i++) steps = status_steps[i]
    }
}
END {
    k = n < window ? n : window; for (i = 0; i < k; i++) sum += last[i]
    printf "first %d+ at %s; best %d; last %d games mean %.1f; %d games\n",
        goal, first == "" ? "never" : first " after " steps " agent steps", best, k, k ? sum / k : 0, n
}
