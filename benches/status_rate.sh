# Sourced by the training benchmarks: one way to read a run's speed off its status
# lines, so that every script's figures mean the same thing.

# mean_status_rate LOG WARM_UP: the mean agent steps/s of LOG's status lines stamped
# after WARM_UP seconds, rounded; "nan" when there are none.
mean_status_rate() {
    sed -n 's/^\[\([0-9]*\)h \([0-9]*\)m \([0-9]*\)s\].*, \([0-9]*\) steps\/s.*/\1 \2 \3 \4/p' "$1" |
        awk -v warm="$2" '$1 * 3600 + $2 * 60 + $3 > warm { sum += $4; n++ }
            END { if (n) printf "%.0f", sum / n; else print "nan" }'
}
