#!/usr/bin/env bash
# Training speed of the two trainers on PongDeterministic-v4, same run: A3C at its
# best worker count against GA3C at several settings and at its defaults (no flag but
# the lag), for the reference model (a3clstm) and the universe model, each run SECONDS
# long, ROUNDS times in turn.
# Prints each run's agent steps/s (mean of the status lines after WARM_UP seconds)
# and GA3C's ratio to A3C's in the same round, with GA3C's mean predict batch, policy
# lag (updates) and dropped segments. docs/benchmarks.md has the results.
#
# Usage: benches/ga3c_speed.sh [SECONDS [ROUNDS]]   (defaults 90 s, 1 round)
#   A3G_BINARY=PATH measures that a3g binary (another build) instead of this tree's.
#   ONLY=REGEX runs only the settings whose name matches (grep -E), e.g. 'universe ga3c'.
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
source "$root/benches/status_rate.sh"
seconds=${1:-90}
rounds=${2:-1}
warm_up=${WARM_UP:-30}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
a3g=${A3G_BINARY:-$root/a3g}
"$a3g" --version >/dev/null

# name | flags
# --max-policy-lag 1000: no segment is dropped, so every agent step counted is one
# trained on (at the default of 20, up to a quarter of the segments were dropped).
lag="--max-policy-lag 1000"
configs=(
    "a3clstm a3c 2 workers|--workers 2"
    "a3clstm ga3c 16 agents, 2 trainers, train batch 8|--trainer ga3c --workers 16 --trainers 2 --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 $lag"
    "a3clstm ga3c 32 agents, 2 trainers, train batch 4|--trainer ga3c --workers 32 --trainers 2 --train-batch 4 --predict-min-batch 16 --predict-timeout-us 4000 $lag"
    "universe a3c 8 workers|--model universe --workers 8"
    "universe ga3c 32 agents, train batch 8|--model universe --trainer ga3c --workers 32 --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 $lag"
    "universe ga3c 64 agents, train batch 16|--model universe --trainer ga3c --workers 64 --train-batch 16 --predict-min-batch 16 --predict-timeout-us 2000 $lag"
    "universe ga3c defaults|--model universe --trainer ga3c $lag"
    "a3clstm ga3c defaults|--model a3clstm --trainer ga3c $lag"
)

echo "PongDeterministic-v4, $seconds s runs, mean of status lines after $warm_up s; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$rounds"); do
    declare -A baseline=()
    for config in "${configs[@]}"; do
        name=${config%%|*}
        if [[ -n ${ONLY:-} ]] && ! grep -qE -- "$ONLY" <<<"$name"; then continue; fi
        read -r -a flags <<<"${config#*|}"
        run="$scratch/run"
        rm -rf "$run" && mkdir -p "$run"
        (cd "$run" && "$a3g" train --env PongDeterministic-v4 --max-time "${seconds}s" \
            --status-interval 5 "${flags[@]}" >out.log 2>err.log) ||
            { echo "$name: failed: $(tail -1 "$run/err.log")"; continue; }
        rate=$(mean_status_rate "$run/out.log" "$warm_up")
        extra=$(grep -o 'mean predict batch [0-9.]*\|policy lag [0-9.]*\|dropped segments [0-9]*' "$run/out.log" | tail -3 | paste -sd, - || true)
        model=${name%% *}
        if [[ $name == *" a3c "* ]]; then
            baseline[$model]=$rate
            echo "round $round, $name: $rate agent steps/s"
        else
            ratio=$(awk -v a="$rate" -v b="${baseline[$model]:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
            echo "round $round, $name: $rate agent steps/s, $ratio A3C's ($extra)"
        fi
    done
done
