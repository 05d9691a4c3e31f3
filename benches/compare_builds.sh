#!/usr/bin/env bash
# Training speed of two a3g binaries on PongDeterministic-v4 in the same run, for a
# change that should not move it (a refactor): each configuration runs SECONDS with
# binary A, then with binary B, and in the second round B first; prints each run's
# agent steps/s (mean of the status lines after WARM_UP seconds) and B's ratio to A.
#
# Usage: benches/compare_builds.sh A_BINARY B_BINARY [SECONDS [ROUNDS]]   (60 s, 2 rounds)
#   ONLY=REGEX runs only the configurations whose name matches (grep -E), e.g. 'universe'.
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/status_rate.sh"
a=$(readlink -f "$1") b=$(readlink -f "$2")
seconds=${3:-60}
rounds=${4:-2}
warm_up=${WARM_UP:-20}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

configs=(
    "universe a3c 8 workers|--model universe --workers 8"
    "universe ga3c 32 agents|--model universe --trainer ga3c --workers 32 --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 --max-policy-lag 1000"
    "a3clstm a3c 2 workers|--model a3clstm --workers 2"
)

rate_of() {
    local binary=$1; shift
    local run="$scratch/run"
    rm -rf "$run" && mkdir -p "$run"
    (cd "$run" && "$binary" train --env PongDeterministic-v4 --max-time "${seconds}s" \
        --status-interval 5 "$@" >out.log 2>err.log) || { echo nan; return; }
    mean_status_rate "$run/out.log" "$warm_up"
}

echo "A: $a"
echo "B: $b"
echo "PongDeterministic-v4, $seconds s runs, mean of status lines after $warm_up s; $(nproc) cores"
for round in $(seq 1 "$rounds"); do
    for config in "${configs[@]}"; do
        name=${config%%|*}
        if [[ -n ${ONLY:-} ]] && ! grep -qE -- "$ONLY" <<<"$name"; then continue; fi
        read -r -a flags <<<"${config#*|}"
        if (( round % 2 == 1 )); then
            rate_a=$(rate_of "$a" "${flags[@]}"); rate_b=$(rate_of "$b" "${flags[@]}")
        else
            rate_b=$(rate_of "$b" "${flags[@]}"); rate_a=$(rate_of "$a" "${flags[@]}")
        fi
        ratio=$(awk -v a="$rate_a" -v b="$rate_b" 'BEGIN { if (a > 0) printf "%.3f", b / a; else print "-" }')
        echo "round $round, $name: A $rate_a, B $rate_b agent steps/s, B/A $ratio"
    done
done
