#!/usr/bin/env bash
# What limits Breakout per agent step: the GA3C Breakout recipe (the universe
# network) for MINUTES a run, once as it is and once per VARIANT changing one thing,
# ROUNDS rounds with seed = the round, the variants' order rotated each round so that
# none always runs first or last. Prints, per run, the wall time and agent steps at the
# first test game of 20 or more, the best game, and the mean of the last 100 test
# games at the budget; every run's logs stay under OUT (for `a3g plot`).
#
# Usage: benches/breakout_sweep.sh MINUTES ROUNDS OUT [VARIANT...]
#   VARIANT: base (the recipe), lr1e-4, lr6e-4, batch4, batch16 (--train-batch), lag5
#   (--max-policy-lag 5), entropy0.02 (--entropy-coef), a3c (--trainer a3c, 8 workers as
#   README's Pong command), queue16 (--segment-queue 16: two batches wait, not 32),
#   universe84 (the universe network over 84x84 screens),
#   reference (--model a3clstm, the reference's 80x80 network).
#   Default: all of them. FROM_ROUND=R starts at round R.
# Run it alone on the machine, or say in the results what shared it.
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
(($# >= 3)) || { echo "usage: $0 MINUTES ROUNDS OUT [VARIANT...]" >&2; exit 2; }
minutes=$1 rounds=$2 out=$3
shift 3
variants=("$@")
((${#variants[@]})) || variants=(base lr1e-4 lr6e-4 batch4 batch16 lag5 entropy0.02 a3c queue16 universe84 reference)
# The wrapper builds the checkout's binary when its sources changed; a given binary is used as it is.
a3g=$(readlink -f "${A3G_BINARY:-$root/target/release/a3g}")
[[ -n ${A3G_BINARY:-} ]] || "$root/a3g" --version >/dev/null
mkdir -p "$out"
pid_file=$(mktemp)
# An interrupted sweep takes its run with it (emptied once a run ends, never to name a reused pid).
trap 'xargs -r kill 2>/dev/null <"$pid_file" || true; rm -f "$pid_file"' EXIT

# The recipe's flags with VARIANT's one change.
flags_of() {
    local -A flag=([--model]=universe [--trainer]=ga3c [--workers]=32 [--train-batch]=8
        [--predict-min-batch]=8 [--predict-timeout-us]=2000 [--lr]=3e-4)
    case $1 in
        base) ;;
        lr1e-4) flag[--lr]=1e-4 ;;
        lr6e-4) flag[--lr]=6e-4 ;;
        batch4) flag[--train-batch]=4 flag[--predict-min-batch]=4 ;;
        batch16) flag[--train-batch]=16 ;;
        lag5) flag[--max-policy-lag]=5 ;;
        entropy0.02) flag[--entropy-coef]=0.02 ;;
        a3c) flag[--trainer]=a3c flag[--workers]=8
            unset 'flag[--train-batch]' 'flag[--predict-min-batch]' 'flag[--predict-timeout-us]' ;;
        queue16) flag[--segment-queue]=16 ;;
        universe84) flag[--model]=universe84 ;;
        reference) flag[--model]=a3clstm ;;
        *) echo "unknown variant $1" >&2; exit 2 ;;
    esac
    local name
    for name in "${!flag[@]}"; do printf '%s\n%s\n' "$name" "${flag[$name]}"; done
}

echo "BreakoutDeterministic-v4, $minutes min a run; variants ${variants[*]}; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "${FROM_ROUND:-1}" "$rounds"); do
    count=${#variants[@]}
    for ((index = 0; index < count; index++)); do
        variant=${variants[$(((index + round - 1) % count))]}
        dir="$out/round$round-$variant"
        rm -rf "$dir" && mkdir -p "$dir"
        mapfile -t flags < <(flags_of "$variant")
        (cd "$dir" && exec "$a3g" train --env BreakoutDeterministic-v4 "${flags[@]}" --seed "$round" \
            --max-time "${minutes}m" --status-interval 10 >out.log 2>err.log) &
        echo $! >"$pid_file"
        wait $! || true
        : >"$pid_file"
        game_log="$dir/logs/BreakoutDeterministic-v4_log"
        [[ -f $game_log ]] || game_log=/dev/null  # a run that failed before its first game
        echo "round $round (seed $round), $variant: $(awk -F', ' -v goal=20 -v window=100 \
            -f "$root/benches/game_log_summary.awk" "$dir/out.log" "$game_log")"
    done
done
