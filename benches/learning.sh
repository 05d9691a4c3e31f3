#!/usr/bin/env bash
# Learning side by side on PongDeterministic-v4 (or --env): a3g, rl_a3c_pytorch and
# ikostrikov/pytorch-a3c each train from scratch for MINUTES of wall time, one after the
# other; prints each one's agent steps/s, best test game, first game of 18+ and 100-game
# means, and draws their curves on the same axes into OUT/learning.png
# (benches/learning.py runs them; docs/benchmarks.md has the results).
#
# Usage: benches/learning.sh [--reference PATH] [--ikostrikov PATH] MINUTES OUT [OPTIONS]
#   OUT: a new folder, e.g. bench-runs/pong-60m (bench-runs/ is ignored by git).
#   OPTIONS go to learning.py: --sides, --env, --workers (the Python trainers'), --a3g-flags,
#   --milestone. --reference / --ikostrikov: a clone or mirror of dgriff777/rl_a3c_pytorch
#   or ikostrikov/pytorch-a3c to take the code from instead of cloning it from GitHub.
#
# Needs the network once: it installs gymnasium, ale-py, opencv-python-headless and
# setproctitle into .deps/reference-python and the two trainers' code into
# .deps/rl_a3c_pytorch and .deps/pytorch-a3c (their Python files, at pinned commits).
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/setup.sh"
a3g_setup
cd "$A3G_ROOT"

reference_source=https://github.com/dgriff777/rl_a3c_pytorch
ikostrikov_source=https://github.com/ikostrikov/pytorch-a3c
while [[ ${1:-} == --reference || ${1:-} == --ikostrikov ]]; do
    [[ -n ${2:-} ]] || a3g_fail "$1 needs a path to a clone or mirror"
    if [[ $1 == --reference ]]; then reference_source=$(readlink -f "$2"); else ikostrikov_source=$(readlink -f "$2"); fi
    shift 2
done

source "$A3G_ROOT/benches/python_a3c.sh"
python_a3c_install_packages
python_a3c_checkout rl_a3c_pytorch "$reference_source" "$rl_a3c_pytorch_commit" "${rl_a3c_pytorch_files[@]}"
python_a3c_checkout pytorch-a3c "$ikostrikov_source" "$pytorch_a3c_commit" "${pytorch_a3c_files[@]}"

cargo build --release --locked --quiet
python3 benches/learning.py --reference "$A3G_DEPS/rl_a3c_pytorch" \
    --ikostrikov "$A3G_DEPS/pytorch-a3c" --a3g target/release/a3g \
    --python-path "$python_a3c_deps:$A3G_DEPS/torch" "$@"
