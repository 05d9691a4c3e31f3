#!/usr/bin/env bash
# Pong across ranks against Pong in one process, same wall time: README's Pong command
# (universe network, GA3C) for MINUTES, once as one process on both cores and once as
# two ranks on 127.0.0.1, each pinned by taskset to a core of its own (so GA3C's
# defaults give each rank 16 agents, the one process 32), in ROUNDS alternated pairs.
# Prints, from each run's game log (rank 0's for the ranks), the time of the first
# test game of 18 or more, the best game, and the mean of the last 10 games.
#
# Usage: benches/ranks_pong.sh [MINUTES [ROUNDS]]   (defaults 15 minutes, 1 round)
#   KEEP=DIR keeps every run's logs and models under DIR (for `a3g plot`).
#   SYNC_MERGE=mean|sum gives the ranks --sync-merge (default sum, a3g's default).
#   FROM_ROUND=R starts at round R (its seed and order), ONLY=one|ranks runs one side.
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
minutes=${1:-15}
rounds=${2:-1}
from_round=${FROM_ROUND:-1}
only=${ONLY:-both}
[[ $only == both || $only == one || $only == ranks ]] || { echo "ONLY must be one, ranks or both" >&2; exit 2; }
a3g=${A3G_BINARY:-$root/target/release/a3g}
"$root/a3g" --version >/dev/null
scratch=${KEEP:-$(mktemp -d)}
mkdir -p "$scratch"
recipe=(train --env PongDeterministic-v4 --model universe --trainer ga3c --lr 3e-4
    --max-time "${minutes}m" --status-interval 30)

# "first 18+ at T; best B; last 10 mean M" from a game log.
summary() {
    awk -F', ' '/^Time / {
            sub(/^Time /, "", $1); split($1, t, /[hms] */); seconds = t[1] * 3600 + t[2] * 60 + t[3]
            split($2, r, " "); reward = r[3] + 0; last[n % 10] = reward; n++
            if (n == 1 || reward > best) best = reward
            if (first == "" && reward >= 18) first = sprintf("%dm %02ds", seconds / 60, seconds % 60)
        }
        END {
            k = n < 10 ? n : 10; for (i = 0; i < k; i++) sum += last[i]
            printf "first 18+ at %s; best %d; last %d games mean %.1f; %d games\n",
                first == "" ? "never" : first, best, k, k ? sum / k : 0, n
        }' "$1"
}

# Whether ONLY lets this side (one or ranks) run.
runs() { [[ $only == both || $only == "$1" ]]; }

one_process() {
    local dir="$scratch/round$1-one"
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && "$a3g" "${recipe[@]}" --seed "$1" >out.log 2>err.log)
    echo "round $1, one process on cores 0-1: $(summary "$dir/logs/PongDeterministic-v4_log")"
}

two_ranks() {
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for rank in 0 1; do
        local dir="$scratch/round$1-rank$rank"
        rm -rf "$dir" && mkdir -p "$dir"
        (cd "$dir" && RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            taskset -c "$rank" "$a3g" "${recipe[@]}" --seed "$1" --sync-merge "${SYNC_MERGE:-sum}" >out.log 2>err.log) &
    done
    wait
    echo "round $1, two ranks on a core each: $(summary "$scratch/round$1-rank0/logs/PongDeterministic-v4_log")"
}

echo "PongDeterministic-v4, universe, GA3C, --lr 3e-4, $minutes min a run; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$from_round" "$rounds"); do
    if ((round % 2 == 1)); then
        if runs one; then one_process "$round"; fi
        if runs ranks; then two_ranks "$round"; fi
    else
        if runs ranks; then two_ranks "$round"; fi
        if runs one; then one_process "$round"; fi
    fi
done
