#!/usr/bin/env bash
# The bridge's cost per step against Gymnasium's AsyncVectorEnv and a3g's built-in
# CartPole-v1 (benches/bridge_steps.rs), then training throughput on gym:CartPole-v1
# against CartPole-v1 with the same flags, alternated, ROUNDS times (default 2).
# Usage: benches/bridge_steps.sh [ROUNDS]
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/setup.sh"
a3g_setup
a3g_ensure_gymnasium
cd "$A3G_ROOT"
export PYTHONPATH="$A3G_DEPS/gymnasium${PYTHONPATH:+:$PYTHONPATH}"
cargo bench --locked --bench bridge_steps
cargo build --release --locked --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(--workers 2 --hidden-size 64 --lr 1e-3 --seed 1 --max-steps 200000)
echo "training, 200,000 agent steps (2 workers, A3C), wall time from start to exit:"
for round in $(seq "${1:-2}"); do
    for env in CartPole-v1 gym:CartPole-v1; do
        rm -rf "$out/m" "$out/l"
        start=$(date +%s.%N)
        target/release/a3g train --env "$env" "${flags[@]}" --save-model-dir "$out/m" \
            --log-dir "$out/l" >/dev/null
        end=$(date +%s.%N)
        awk -v r="$round" -v e="$env" -v s="$start" -v t="$end" \
            'BEGIN { printf "round %s  %-16s %6.1f s  %6.0f agent steps/s\n", r, e, t - s, 200000 / (t - s) }'
    done
done
