#!/usr/bin/env bash
# CartPole-v1: wall time until the 100-episode mean reaches 475, a3g against
# MorvanZhou's pytorch-A3C on the same machine, RUNS times each, alternating.
# Needs the network once: it installs numpy and gymnasium into .deps/bench-python and
# clones pytorch-A3C into .deps/pytorch-A3C. Usage: benches/cartpole_vs_pytorch_a3c.sh [RUNS]
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/setup.sh"
a3g_setup
cd "$A3G_ROOT"
runs=${1:-3}
workers=2
bench_python="$A3G_DEPS/bench-python"
[[ -d $bench_python ]] || a3g_pip_install "$bench_python" numpy gymnasium==1.0.0
reference="$A3G_DEPS/pytorch-A3C"
if [[ ! -d $reference ]]; then
    git clone --quiet https://github.com/MorvanZhou/pytorch-A3C "$reference.partial"
    mv "$reference.partial" "$reference"
fi
cargo build --release --locked --quiet
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for run in $(seq "$runs"); do
    echo "run $run"
    PYTHONPATH="$bench_python:$A3G_DEPS/torch" OMP_NUM_THREADS=1 \
        python3 benches/cartpole_vs_pytorch_a3c.py "$reference" "$workers" 2>/dev/null
    started=$(date +%s.%N)
    (cd "$scratch" && "$A3G_ROOT/a3g" train --env CartPole-v1 --workers "$workers" --seed "$run" \
        --hidden-size 64 --lr 1e-3 --max-time 30m --stop-at-mean 475 --status-interval 3600 |
        grep '^Time' | tail -n 1 | sed 's/^/a3g: /')
    echo "a3g: wall $(echo "$(date +%s.%N) - $started" | bc) s (including start-up)"
done
