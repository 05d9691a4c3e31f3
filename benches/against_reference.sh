#!/usr/bin/env bash
# Training speed on PongDeterministic-v4, a3g against rl_a3c_pytorch in the same run:
# the reference's main.py (unmodified) and `a3g train`, alternating, each for SECONDS,
# ROUNDS times; prints both agent steps/s, their ratio and the test agents' CPU shares
# (benches/against_reference.py measures; docs/benchmarks.md has the results).
#
# Usage: benches/against_reference.sh [--reference PATH] [SECONDS [WORKERS [ROUNDS]]] [--only a3g]
#   defaults 300 s, 2 workers, 2 rounds; options after the numbers go to
#   against_reference.py (--warm-up S, --env ID, --only reference|a3g).
#   --reference: a clone or mirror of dgriff777/rl_a3c_pytorch (bare or not) to take
#   the reference from instead of cloning it from GitHub.
#   A3G_BINARY=PATH measures that a3g binary (another build) instead of this tree's.
#
# Needs the network once: it installs gymnasium, ale-py, opencv-python-headless and
# setproctitle into .deps/reference-python and puts the reference's code into
# .deps/rl_a3c_pytorch (its Python files and config.json, at the commit below).
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/setup.sh"
a3g_setup
cd "$A3G_ROOT"

source_repo=https://github.com/dgriff777/rl_a3c_pytorch
if [[ ${1:-} == --reference ]]; then
    [[ -n ${2:-} ]] || a3g_fail "--reference needs a path to a clone or mirror of rl_a3c_pytorch"
    source_repo=$(readlink -f "$2")
    shift 2
fi

source "$A3G_ROOT/benches/python_a3c.sh"
python_a3c_install_packages
python_a3c_checkout rl_a3c_pytorch "$source_repo" "$rl_a3c_pytorch_commit" "${rl_a3c_pytorch_files[@]}"
reference="$A3G_DEPS/rl_a3c_pytorch"

a3g=${A3G_BINARY:-}
if [[ -z $a3g ]]; then
    cargo build --release --locked --quiet
    a3g=target/release/a3g
fi
python3 benches/against_reference.py --reference "$reference" --a3g "$a3g" \
    --python-path "$python_a3c_deps:$A3G_DEPS/torch" "$@"
