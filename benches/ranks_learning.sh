#!/usr/bin/env bash
# Learning across ranks against learning in one process, same run: CartPole-v1 with
# the learning tests' recipe to --stop-at-mean 475, once as one process of N workers
# and once as N ranks of one worker each on 127.0.0.1 (for each merge in SYNC_MERGE),
# for every N in RANKS, alternating ROUNDS times (even rounds start with the ranks),
# each round with seed SEED + round. Prints the agent steps (summed over ranks) and
# wall seconds each took to its stop, and the ranks' steps as a ratio of the one
# process's; a run that stopped at MAX_STEPS without reaching 475 shows its steps
# with a '+'. Ends with the steps of every side summed over the rounds.
#
# Usage: benches/ranks_learning.sh [ROUNDS [SEED]]   (defaults 3 rounds, seed 1)
#   RANKS="1 2 4 8" measures each of these N (default 2); N=1 runs the one process alone.
#   SYNC_INTERVAL=S syncs the ranks every S seconds (default: a3g's, 1 s at 2 ranks, 0.05 s at 3 or more).
#   SYNC_MERGE="sum mean" runs the ranks once per merge (default sum, a3g's default).
#   RANK_LR=sqrt|linear gives N ranks --lr 1e-3 / sqrt(N) or / N (default: 1e-3, as the one process).
#   ONLY=one|ranks runs one side; MAX_STEPS caps every run (default 3000000).
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
rounds=${1:-3}
seed=${2:-1}
interval=${SYNC_INTERVAL:-}
interval_said=${interval:+every $interval s}
read -r -a rank_counts <<<"${RANKS:-2}"
read -r -a merges <<<"${SYNC_MERGE:-sum}"
rank_lr=${RANK_LR:-same}
only=${ONLY:-both}
[[ $only == both || $only == one || $only == ranks ]] || { echo "ONLY must be one, ranks or both" >&2; exit 2; }
# The wrapper builds the checkout's binary when its sources changed; a given binary is used as it is.
a3g=${A3G_BINARY:-$root/target/release/a3g}
[[ -n ${A3G_BINARY:-} ]] || "$root/a3g" --version >/dev/null
scratch=$(mktemp -d)
# The runs start inside command substitutions, out of this shell's job table; the pids
# of the runs under way are kept so that an interrupted bench leaves no rank waiting out
# --sync-timeout (and, emptied once they end, never name a reused pid).
trap 'xargs -r kill 2>/dev/null <"$scratch/pids" || true; rm -rf "$scratch"' EXIT
: >"$scratch/pids"
lr=1e-3
case $rank_lr in
    same) ranks_lr_rule=$lr ;;
    sqrt) ranks_lr_rule="$lr / sqrt(N)" ;;
    linear) ranks_lr_rule="$lr / N" ;;
    *) echo "RANK_LR must be sqrt or linear" >&2; exit 2 ;;
esac
recipe=(train --env CartPole-v1 --hidden-size 64 --stop-at-mean 475 --max-steps "${MAX_STEPS:-3000000}" --status-interval 60)

# "STEPS SECONDS" of a finished run: the agent steps its final line reports, with a '+'
# when the run stopped without reaching 475.
result_of() {
    local steps
    steps=$(sed -n 's/.* after \([0-9]*\) agent steps.*/\1/p' "$1" | tail -1)
    grep -q '^reached --stop-at-mean' "$1" || steps="$steps+"
    echo "$steps $2"
}

# Whether ONLY lets this side (one or ranks) run.
runs() { [[ $only == both || $only == "$1" ]]; }

one_process() { # SEED WORKERS
    local dir="$scratch/one" started=$SECONDS
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && exec "$a3g" "${recipe[@]}" --lr "$lr" --seed "$1" --workers "$2" >out.log 2>err.log) &
    echo $! >>"$scratch/pids"
    wait
    : >"$scratch/pids"
    result_of "$dir/out.log" $((SECONDS - started))
}

ranks() { # SEED N MERGE
    local port started=$SECONDS rank_lr_value
    rank_lr_value=$(awk -v lr="$lr" -v n="$2" -v rule="$rank_lr" \
        'BEGIN { printf "%g", rule == "sqrt" ? lr / sqrt(n) : rule == "linear" ? lr / n : lr }')
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for ((rank = 0; rank < $2; rank++)); do
        local dir="$scratch/rank$rank"
        rm -rf "$dir" && mkdir -p "$dir"
        (cd "$dir" && RANK=$rank WORLD_SIZE=$2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            exec "$a3g" "${recipe[@]}" --lr "$rank_lr_value" --seed "$1" --workers 1 \
            ${interval:+--sync-interval "$interval"} --sync-merge "$3" >out.log 2>err.log) &
        echo $! >>"$scratch/pids"
    done
    wait
    : >"$scratch/pids"
    result_of "$scratch/rank0/out.log" $((SECONDS - started))
}

# One line per side: "SIDE STEPS SECONDS".
round_of() { # SEED N RANKS_FIRST
    local merge
    if [[ $3 == no ]] && runs one; then echo "one $(one_process "$1" "$2")"; fi
    if (($2 > 1)) && runs ranks; then
        for merge in "${merges[@]}"; do echo "$merge $(ranks "$1" "$2" "$merge")"; done
    fi
    if [[ $3 == yes ]] && runs one; then echo "one $(one_process "$1" "$2")"; fi
}

echo "CartPole-v1 to --stop-at-mean 475: one process of N workers against N ranks of 1 worker" \
    "(${merges[*]}; ranks' --lr $ranks_lr_rule) syncing ${interval_said:-at the default interval}, N in ${rank_counts[*]}; $(nproc) cores"
for round in $(seq 1 "$rounds"); do
    run_seed=$((seed + round))
    for n in "${rank_counts[@]}"; do
        round_of "$run_seed" "$n" "$( ((round % 2 == 0)) && echo yes || echo no)" >"$scratch/round"
        cat "$scratch/round" >>"$scratch/all.$n"
        awk -v r="$round" -v s="$run_seed" -v n="$n" '
            $1 == "one" { one = $2; line = sprintf(" one process of %d worker%s %s agent steps in %d s;", n, n == 1 ? "" : "s", $2, $3) line; next }
            { ranks[++k] = $0 }
            END {
                for (i = 1; i <= k; i++) {
                    split(ranks[i], f, " ")
                    line = line sprintf(" %d ranks, %s: %s in %d s%s;", n, f[1], f[2], f[3], one ? sprintf(" (%.2fx)", f[2] / one) : "")
                }
                printf "round %d (seed %d), N=%d:%s\n", r, s, n, substr(line, 1, length(line) - 1)
            }' "$scratch/round"
    done
done
for n in "${rank_counts[@]}"; do
    awk -v n="$n" '{ sum[$1] += $2; runs[$1]++; if ($2 ~ /\+$/) short[$1]++; if (!($1 in seen)) { seen[$1]; order[++k] = $1 } }
        END {
            for (i = 1; i <= k; i++) {
                side = order[i]
                printf "all rounds, N=%d, %s: %d agent steps over %d runs%s%s\n", n, side == "one" ? "one process" : side, sum[side], runs[side],
                    side != "one" && sum["one"] ? sprintf(", %.2fx the one process", sum[side] / sum["one"]) : "",
                    short[side] ? sprintf(" (%d stopped short of 475)", short[side]) : ""
            }
        }' "$scratch/all.$n"
done
