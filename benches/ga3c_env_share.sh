#!/usr/bin/env bash
# GA3C with the universe network at its defaults against the environment alone, same
# run: each round steps PongDeterministic-v4's full stack (the universe network's
# 42x42 screen) on one thread per core for ENV_SECONDS, then trains GA3C on it for
# SECONDS, and prints both agent steps/s and GA3C's share of the environment-only rate.
# docs/benchmarks.md has the results.
#
# Usage: benches/ga3c_env_share.sh [SECONDS [ROUNDS]]   (defaults 90 s, 2 rounds)
#   ENV_SECONDS (default 20), WARM_UP (default 30: status lines before it are left out),
#   THREADS (default: cores) threads for the environment alone,
#   A3G_BINARY=PATH measures that a3g binary (another build) instead of this tree's.
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
source "$root/benches/status_rate.sh"
seconds=${1:-90}
rounds=${2:-2}
env_seconds=${ENV_SECONDS:-20}
warm_up=${WARM_UP:-30}
threads=${THREADS:-$(nproc)}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
a3g=${A3G_BINARY:-$root/a3g}
"$a3g" --version >/dev/null
source "$root/scripts/setup.sh"
a3g_setup
(cd "$root" && cargo build --release --locked --quiet --bench env_threads)
env_bench=$(ls -t "$root"/target/release/deps/env_threads-* | grep -v '\.d$' | head -n 1)

echo "PongDeterministic-v4, universe screen; environment alone on $threads threads for $env_seconds s, GA3C defaults for $seconds s (mean of status lines after $warm_up s); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$rounds"); do
    env_rate=$("$env_bench" "$threads" "$env_seconds" mean42 | sed -n 's/.*: \([0-9]*\) agent steps\/s in all.*/\1/p')
    run="$scratch/run"
    rm -rf "$run" && mkdir -p "$run"
    # --max-policy-lag 1000: no segment is dropped, so every agent step counted is one
    # trained on.
    (cd "$run" && "$a3g" train --env PongDeterministic-v4 --model universe --trainer ga3c \
        --max-policy-lag 1000 --max-time "${seconds}s" --status-interval 5 >out.log 2>err.log) ||
        { echo "round $round: GA3C failed: $(tail -1 "$run/err.log")"; continue; }
    ga3c_rate=$(mean_status_rate "$run/out.log" "$warm_up")
    share=$(awk -v a="$ga3c_rate" -v b="$env_rate" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "-" }')
    echo "round $round: environment alone $env_rate, GA3C defaults $ga3c_rate agent steps/s: $share"
done
