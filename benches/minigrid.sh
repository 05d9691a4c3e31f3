#!/usr/bin/env bash
# A package of environments outside Gymnasium through the bridge: MiniGrid's
# Empty-8x8 (or ENV), its Dict observations turned into a vector by MiniGrid's image
# wrapper and Gymnasium's flattening, trained by a3g until the test agent's 100-game mean
# reaches STOP (default 0.96, the best score: the goal 11 steps away, 1 - 0.9 * 11/256)
# or 10 minutes pass, then its curve drawn and its weights evaluated over 100 games.
# Installs gymnasium and minigrid into .deps/ as scripts/test does.
# Usage: benches/minigrid.sh SEED OUT   (OUT: a new folder, e.g. bench-runs/minigrid-1)
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/setup.sh"
a3g_setup
a3g_ensure_gymnasium
a3g_ensure_minigrid
cd "$A3G_ROOT"
[[ $# -eq 2 ]] || a3g_fail "usage: benches/minigrid.sh SEED OUT"
seed=$1 out=$2
env=${ENV:-gym:MiniGrid-Empty-8x8-v0}
export PYTHONPATH="$A3G_DEPS/gymnasium:$A3G_DEPS/minigrid"
cargo build --release --locked --quiet
mkdir -p "$out"
flags=(--env "$env" --env-import minigrid --env-wrapper minigrid.wrappers:ImgObsWrapper
    --env-wrapper gymnasium.wrappers:FlattenObservation --normalize-obs --workers 2 --hidden-size 64 --lr 1e-3
    --seed "$seed" --stop-at-mean "${STOP:-0.96}" --max-time 10m)
echo "./a3g train ${flags[*]}" >"$out/command.txt"
started=$SECONDS
target/release/a3g train "${flags[@]}" --save-model-dir "$out/models" --log-dir "$out/logs" \
    --status-interval 30 >"$out/train.txt"
echo "wall seconds: $((SECONDS - started))" | tee -a "$out/train.txt"
tail -1 "$out/train.txt"
grep -v '^\[\|^Time' "$out/train.txt" | tail -2
target/release/a3g plot "$out/logs/${env}_log" --output "$out/curve.png"
target/release/a3g eval --env "$env" --num-episodes 100 --load-model-dir "$out/models" \
    --log-dir "$out/logs" | tail -1 | tee "$out/eval.txt"
