# Summarises one training run for the benches: its status lines (out.log, the first
# file) give the agent steps over time, its game log (the second) the test games.
# Prints "first GOAL+ at T after S agent steps; best B; last N games mean M; G games",
# where S is the agent steps of the last status line before that game ended and N is
# at most WINDOW. With -v steps=C1,C2,... it adds "; means at C1 / C2 / ...: M1 / M2 / ...",
# each the mean of the last WINDOW games that ended by the first status line at or past
# that count of agent steps ("-" for a count the run did not reach).
#
# Usage: awk -F', ' -v goal=18 -v window=10 [-v steps=500000,1000000] -f benches/game_log_summary.awk out.log GAME_LOG
function seconds_of(clock,   t) { split(clock, t, /[hms] */); return t[1] * 3600 + t[2] * 60 + t[3] }
# The mean of the last `window` games that ended by `seconds` (0 if none did), with
# how many those were in window_games.
function window_mean(seconds,   i, sum) {
    window_games = 0
    for (i = games; i >= 1 && window_games < window; i--)
        if (game_time[i] <= seconds) { sum += game_reward[i]; window_games++ }
    return window_games ? sum / window_games : 0
}
FILENAME ~ /out\.log$/ {
    if ($1 ~ /^\[.*\] agent steps /) {
        split(substr($1, 2), s, /\] agent steps /); status_time[++statuses] = seconds_of(s[1]); status_steps[statuses] = s[2] + 0
    }
    next
}
/^Time / {
    sub(/^Time /, "", $1); seconds = seconds_of($1)
    split($2, r, " "); reward = r[3] + 0
    game_time[++games] = seconds; game_reward[games] = reward
    if (games == 1 || reward > best) best = reward
    if (first == "" && reward >= goal) {
        first = sprintf("%dm %02ds", seconds / 60, seconds % 60); first_steps = 0
        for (i = 1; i <= statuses && status_time[i] <= seconds; i++) first_steps = status_steps[i]
    }
}
END {
    final_mean = window_mean(game_time[games])
    printf "first %d+ at %s; best %d; last %d games mean %.1f; %d games",
        goal, first == "" ? "never" : first " after " first_steps " agent steps", best, window_games, final_mean, games
    if (steps != "") {
        count = split(steps, goal_steps, ",")
        for (g = 1; g <= count; g++) {
            # When the counter first reached the count; a run that never did gets "-".
            reached = -1
            for (i = 1; i <= statuses; i++) if (status_steps[i] >= goal_steps[g] + 0) { reached = status_time[i]; break }
            mean = reached < 0 ? 0 : window_mean(reached)
            means = means (g > 1 ? " / " : "") (reached < 0 || !window_games ? "-" : sprintf("%.1f", mean))
        }
        printf "; means at %s: %s", steps, means
    }
    printf "\n"
}
