#!/usr/bin/env bash
# A MuJoCo task through the bridge: Gymnasium's Hopper-v5 (or ENV) trained by a3g for
# MINUTES on this machine's cores, then its learning curve drawn and its saved weights
# evaluated over 100 games. Needs the network once: installs gymnasium[mujoco] into
# .deps/mujoco (mujoco's wheel brings the engine; no system packages).
# Usage: benches/mujoco.sh MINUTES OUT [a3g train flags...]
#   OUT: a new folder, e.g. bench-runs/hopper-30m (bench-runs/ is ignored by git).
#   Flags given replace the recipe below (the env and --max-time stay).
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/setup.sh"
a3g_setup
cd "$A3G_ROOT"
[[ $# -ge 2 ]] || a3g_fail "usage: benches/mujoco.sh MINUTES OUT [a3g train flags...]"
minutes=$1 out=$2; shift 2
env=${ENV:-gym:Hopper-v5}
a3g_ensure_python_package mujoco 1.2.2 "gymnasium[mujoco]==1.2.2" \
    "which this benchmark's environment runs on" "about 60 MB"
export PYTHONPATH="$A3G_DEPS/mujoco${PYTHONPATH:+:$PYTHONPATH}"
cargo build --release --locked --quiet
mkdir -p "$out"
flags=(--env "$env" --workers 2 --seed 1 --hidden-size 128 --lr 1e-4 --amsgrad --gamma 0.99
    --tau 0.95 --value-coef 0.4 --entropy-coef 0.001 --reward-clip off --normalize-obs
    --min-std 0.1 --test-share 0.25 --save-max --max-time "${minutes}m")
[[ $# -eq 0 ]] || flags=(--env "$env" --max-time "${minutes}m" "$@")
echo "./a3g train ${flags[*]}" >"$out/command.txt"
target/release/a3g train "${flags[@]}" --save-model-dir "$out/models" --log-dir "$out/logs" \
    --status-interval 60 | tee "$out/train.txt"
stem=${env//\//_}
target/release/a3g plot "$out/logs/${stem}_log" --output "$out/curve.png"
target/release/a3g eval --env "$env" --num-episodes 100 --load-model-dir "$out/models" \
    --log-dir "$out/logs" | tail -1 | tee "$out/eval.txt"
