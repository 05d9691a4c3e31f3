#!/usr/bin/env bash
# Learning across ranks against learning in one process, same run: CartPole-v1 with
# the learning tests' recipe to --stop-at-mean 475, once as one process of two workers
# and once as two ranks of one worker each on 127.0.0.1, alternating ROUNDS times
# (even rounds start with the ranks), each with seed SEED + round. Prints the agent
# steps (summed over ranks) and wall seconds each took to its stop, and the ranks'
# steps as a ratio of the one process's.
#
# Usage: benches/ranks_learning.sh [ROUNDS [SEED]]   (defaults 3 rounds, seed 1)
#   SYNC_INTERVAL=S syncs the ranks every S seconds (default 1, a3g's default).
#   SYNC_MERGE=mean|sum gives the ranks --sync-merge (default sum, a3g's default).
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
rounds=${1:-3}
seed=${2:-1}
interval=${SYNC_INTERVAL:-1}
a3g=${A3G_BINARY:-$root/target/release/a3g}
"$root/a3g" --version >/dev/null
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
recipe=(train --env CartPole-v1 --hidden-size 64 --lr 1e-3 --stop-at-mean 475 --max-steps 3000000 --status-interval 60)

# The agent steps a run's final line reports.
steps_of() { sed -n 's/.* after \([0-9]*\) agent steps.*/\1/p' "$1" | tail -1; }

one_process() {
    local dir="$scratch/one" started=$SECONDS
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && "$a3g" "${recipe[@]}" --seed "$1" --workers 2 >out.log 2>err.log)
    echo "$(steps_of "$dir/out.log") $((SECONDS - started))"
}

two_ranks() {
    local port started=$SECONDS
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for rank in 0 1; do
        local dir="$scratch/rank$rank"
        rm -rf "$dir" && mkdir -p "$dir"
        (cd "$dir" && RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            "$a3g" "${recipe[@]}" --seed "$1" --workers 1 --sync-interval "$interval" --sync-merge "${SYNC_MERGE:-sum}" >out.log 2>err.log) &
    done
    wait
    echo "$(steps_of "$scratch/rank0/out.log") $((SECONDS - started))"
}

echo "CartPole-v1 to --stop-at-mean 475: one process of 2 workers against 2 ranks of 1 syncing every $interval s; $(nproc) cores"
for round in $(seq 1 "$rounds"); do
    run_seed=$((seed + round))
    if (( round % 2 == 1 )); then
        read -r one_steps one_seconds < <(one_process "$run_seed")
        read -r rank_steps rank_seconds < <(two_ranks "$run_seed")
    else
        read -r rank_steps rank_seconds < <(two_ranks "$run_seed")
        read -r one_steps one_seconds < <(one_process "$run_seed")
    fi
    awk -v r="$round" -v s="$run_seed" -v a="$one_steps" -v at="$one_seconds" -v b="$rank_steps" -v bt="$rank_seconds" \
        'BEGIN { printf "round %d (seed %d): one process %d agent steps in %.0f s; two ranks %d in %.0f s: %.2fx the steps\n", r, s, a, at, b, bt, b / a }'
done
