#!/usr/bin/env bash
# What syncing costs a rank: two ranks on 127.0.0.1, each pinned to a core of its own
# (taskset), against two independent runs pinned the same way, so that both sides share
# the machine alike; each side runs SECONDS, ROUNDS times, alternating (the second round
# starts with the other side). Prints each process's agent steps/s (mean of the status
# lines after WARM_UP seconds) and the ranks' mean as a ratio of the independent runs'.
#
# Usage: benches/sync_overhead.sh [SECONDS [ROUNDS [INTERVAL]]]   (60 s, 2 rounds, 1 s)
#   extra flags for both sides in FLAGS (default: Pong, --model universe, 4 workers).
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
source "$root/benches/status_rate.sh"
seconds=${1:-60}
rounds=${2:-2}
interval=${3:-1}
warm_up=${WARM_UP:-20}
read -r -a flags <<<"${FLAGS:---env PongDeterministic-v4 --model universe --workers 4}"
a3g=${A3G_BINARY:-$root/target/release/a3g}
"$root/a3g" --version >/dev/null
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# side NAME: runs two processes, on cores 0 and 1; ranks when NAME is "ranks".
side() {
    local name=$1 port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for index in 0 1; do
        local dir="$scratch/$name$index"
        rm -rf "$dir" && mkdir -p "$dir"
        if [[ $name == ranks ]]; then
            (cd "$dir" && RANK=$index WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
                taskset -c "$index" "$a3g" train "${flags[@]}" --max-time "${seconds}s" \
                --status-interval 5 --sync-interval "$interval" >out.log 2>err.log) &
        else
            (cd "$dir" && taskset -c "$index" "$a3g" train "${flags[@]}" --max-time "${seconds}s" \
                --status-interval 5 >out.log 2>err.log) &
        fi
    done
    wait
}

echo "${flags[*]}, $seconds s runs, sync every $interval s, status lines after $warm_up s; $(nproc) cores"
for round in $(seq 1 "$rounds"); do
    order=(alone ranks)
    (( round % 2 == 0 )) && order=(ranks alone)
    for name in "${order[@]}"; do side "$name"; done
    # A rank's status lines count every rank's steps, so one rank's rate is the
    # world's over two.
    alone0=$(mean_status_rate "$scratch/alone0/out.log" "$warm_up")
    alone1=$(mean_status_rate "$scratch/alone1/out.log" "$warm_up")
    world=$(mean_status_rate "$scratch/ranks0/out.log" "$warm_up")
    awk -v a="$alone0" -v b="$alone1" -v w="$world" -v r="$round" 'BEGIN {
        alone = (a + b) / 2; rank = w / 2
        printf "round %d: independent runs %d and %d agent steps/s; ranks %d together, %d each: %.3fx\n",
            r, a, b, w, rank, rank / alone }'
done
