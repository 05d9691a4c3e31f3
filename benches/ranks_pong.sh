#!/usr/bin/env bash
# Pong across ranks against Pong in one process: README's Pong command (universe
# network, GA3C) for MINUTES, once as one process on all cores and once as RANKS ranks
# on 127.0.0.1, rank r pinned by taskset to core r mod the cores (so that, with GA3C's
# defaults, two ranks on two cores get 16 agents each and the one process 32), in
# ROUNDS alternated pairs. Prints, from each run's game log (rank 0's for the ranks),
# the time of the first test game of 18 or more and the agent steps by then (the
# world's, from the last status line before that game ended), the best game, and the
# mean of the last 10 games.
#
# Usage: benches/ranks_pong.sh [MINUTES [ROUNDS]]   (defaults 15 minutes, 1 round)
#   RANKS=N runs N ranks (default 2).
#   WORKERS=W gives every rank, and the one process, W agents (default: GA3C's per core).
#   STOP_AT_GOAL=1 ends a run at its first test game of 18 or more; MINUTES is then a cap.
#   MAX_STEPS=S caps every run at S agent steps (all ranks' together).
#   KEEP=DIR keeps every run's logs and models under DIR (for `a3g plot`).
#   SYNC_MERGE=mean|sum gives the ranks --sync-merge (default sum, a3g's default).
#   SYNC_INTERVAL=S gives the ranks --sync-interval S (default: a3g's, 1 s at 2 ranks, 0.05 s at more).
#   FROM_ROUND=R starts at round R (its seed and order), ONLY=one|ranks runs one side.
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
minutes=${1:-15}
rounds=${2:-1}
from_round=${FROM_ROUND:-1}
only=${ONLY:-both}
world=${RANKS:-2}
cores=$(nproc)
goal=18
[[ $only == both || $only == one || $only == ranks ]] || { echo "ONLY must be one, ranks or both" >&2; exit 2; }
# The wrapper builds the checkout's binary when its sources changed; a given binary is used as it is.
a3g=${A3G_BINARY:-$root/target/release/a3g}
[[ -n ${A3G_BINARY:-} ]] || "$root/a3g" --version >/dev/null
scratch=${KEEP:-$(mktemp -d)}
mkdir -p "$scratch"
pids=$(mktemp)
# An interrupted bench takes the runs under way with it, so that no rank waits out
# --sync-timeout (the list is emptied once they end, never to name a reused pid).
trap 'xargs -r kill 2>/dev/null <"$pids" || true; rm -f "$pids"' EXIT
recipe=(train --env PongDeterministic-v4 --model universe --trainer ga3c --lr 3e-4
    --max-time "${minutes}m" --status-interval 10
    ${WORKERS:+--workers "$WORKERS"} ${MAX_STEPS:+--max-steps "$MAX_STEPS"})
game_log=logs/PongDeterministic-v4_log

# "first 18+ at T after S agent steps; best B; last 10 mean M" from a run's folder.
summary() {
    awk -F', ' -v goal="$goal" -v window=10 -f "$root/benches/game_log_summary.awk" "$1/out.log" "$1/$game_log"
}

# Whether ONLY lets this side (one or ranks) run.
runs() { [[ $only == both || $only == "$1" ]]; }

# Waits for the runs PID..., the first of which (rank 0) writes GAME_LOG; with
# STOP_AT_GOAL, stops it at its first game of 18 or more (SIGTERM on rank 0 reaches
# the other ranks at the next sync).
await() { # GAME_LOG PID...
    local log=$1
    shift
    if [[ -n ${STOP_AT_GOAL:-} ]]; then
        while kill -0 "$1" 2>/dev/null; do
            if [[ -f $log ]] && awk -F', ' -v goal="$goal" '/^Time / { split($2, r, " "); if (r[3] + 0 >= goal) won = 1 } END { exit !won }' "$log"; then
                kill -TERM "$1"
                break
            fi
            sleep 5
        done
    fi
    # A run stopped by SIGTERM may exit non-zero; its logs say how it ended.
    wait "$@" || true
    : >"$pids"
}

one_process() {
    local dir="$scratch/round$1-one"
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && exec "$a3g" "${recipe[@]}" --seed "$1" >out.log 2>err.log) &
    echo $! >>"$pids"
    await "$dir/$game_log" $!
    echo "round $1, one process on all $cores cores${WORKERS:+ ($WORKERS agents)}: $(summary "$dir")"
}

ranks() {
    local port rank rank_pids=()
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for ((rank = 0; rank < world; rank++)); do
        local dir="$scratch/round$1-rank$rank"
        rm -rf "$dir" && mkdir -p "$dir"
        (cd "$dir" && RANK=$rank WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            exec taskset -c $((rank % cores)) "$a3g" "${recipe[@]}" --seed "$1" --sync-merge "${SYNC_MERGE:-sum}" \
            ${SYNC_INTERVAL:+--sync-interval "$SYNC_INTERVAL"} >out.log 2>err.log) &
        rank_pids+=($!)
        echo $! >>"$pids"
    done
    await "$scratch/round$1-rank0/$game_log" "${rank_pids[@]}"
    echo "round $1, $world ranks, rank r on core r mod $cores${WORKERS:+ ($WORKERS agents each)}: $(summary "$scratch/round$1-rank0")"
}

echo "PongDeterministic-v4, universe, GA3C, --lr 3e-4, $minutes min a run at most; $cores cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$from_round" "$rounds"); do
    if ((round % 2 == 1)); then
        if runs one; then one_process "$round"; fi
        if runs ranks; then ranks "$round"; fi
    else
        if runs ranks; then ranks "$round"; fi
        if runs one; then one_process "$round"; fi
    fi
done
