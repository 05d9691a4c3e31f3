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

python_deps="$A3G_DEPS/reference-python"
python_packages=(gymnasium==1.4.0 ale-py==0.12.1 opencv-python-headless==5.0.0.93 setproctitle==1.3.8)
if [[ ! -e $python_deps/.a3g-installed ]]; then
    a3g_say "installing the reference's Python packages (${python_packages[*]}) into $python_deps"
    a3g_pip_install "$python_deps" "${python_packages[@]}"
    touch "$python_deps/.a3g-installed"
fi

# The last commit of rl_a3c_pytorch (2023-04-18), so that every run measures the same
# code. Only the files main.py needs are taken: a mirror may lack the trained-model
# blobs, and the benchmark needs none.
reference_commit=4170f7d94852129dc70265648c219e6b412965be
reference_files=(main.py train.py test.py model.py player_util.py shared_optim.py environment.py utils.py config.json)
reference="$A3G_DEPS/rl_a3c_pytorch"
if [[ ! -e $reference/.a3g-commit-$reference_commit ]]; then
    if [[ ! -d $source_repo ]]; then
        clone="$A3G_DEPS/rl_a3c_pytorch.git"
        if [[ ! -d $clone ]]; then
            a3g_say "cloning $source_repo into $clone"
            rm -rf "$clone.partial"
            git clone --quiet --bare "$source_repo" "$clone.partial" ||
                a3g_fail "could not clone $source_repo; pass --reference with a local clone or mirror"
            mv "$clone.partial" "$clone"
        fi
        source_repo=$clone
    fi
    rm -rf "$reference.partial"
    mkdir -p "$reference.partial"
    for file in "${reference_files[@]}"; do
        git -C "$source_repo" show "$reference_commit:$file" >"$reference.partial/$file" ||
            a3g_fail "$source_repo has no $file at commit $reference_commit of rl_a3c_pytorch; pass a clone that has it"
    done
    touch "$reference.partial/.a3g-commit-$reference_commit"
    rm -rf "$reference"
    mv "$reference.partial" "$reference"
fi

cargo build --release --locked --quiet
python3 benches/against_reference.py --reference "$reference" --a3g target/release/a3g \
    --python-path "$python_deps:$A3G_DEPS/torch" "$@"
