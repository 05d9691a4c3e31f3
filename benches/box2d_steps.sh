#!/usr/bin/env bash
# Environment steps/s of the Box2D tasks on one core, a3g against Gymnasium in the same
# run: both replay Gymnasium's recorded episodes (tests/fixtures/box2d_episodes.json:
# the same seeds and actions), pinned to core 0, alternating, ROUNDS times each.
#
# Usage: benches/box2d_steps.sh [ROUNDS]   (default 3)
#
# Needs the network once: it installs gymnasium, box2d and pygame (which gymnasium's
# Box2D package imports) into .deps/box2d-python.
set -euo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../scripts/setup.sh"
a3g_setup
cd "$A3G_ROOT"

packages=(gymnasium==1.4.0 box2d==2.3.10 pygame==2.6.1)
gymnasium_deps="$A3G_DEPS/box2d-python"
if [[ ! -e $gymnasium_deps/.a3g-installed ]]; then
    a3g_say "installing ${packages[*]} into $gymnasium_deps"
    a3g_pip_install "$gymnasium_deps" "${packages[@]}"
    touch "$gymnasium_deps/.a3g-installed"
fi
cargo build --release --locked --quiet --bench box2d_steps
bench=$(ls -t target/release/deps/box2d_steps-* | grep -v '\.d$' | head -n 1)

for round in $(seq "${1:-3}"); do
    echo "round $round"
    for family in LunarLander BipedalWalker; do
        taskset -c 0 "$bench" "$family"
        PYGAME_HIDE_SUPPORT_PROMPT=1 PYTHONPATH="$gymnasium_deps" taskset -c 0 \
            python3 benches/box2d_steps.py "$family"
    done
done
