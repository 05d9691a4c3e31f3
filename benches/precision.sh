#!/usr/bin/env bash
# --precision bf16 against fp32, same run: GA3C with the universe network on
# PongDeterministic-v4 at its defaults, ROUNDS alternated rounds of SECONDS each,
# agent steps/s from the status lines after WARM_UP seconds; then a3g's own per-pass
# times (benches/precision.rs). It says whether this CPU computes bf16 natively and
# claims no ratio where it does not (libtorch then emulates bf16, several times
# slower). docs/benchmarks.md ("bf16") has the results.
#
# Usage: benches/precision.sh [SECONDS [ROUNDS]]   (defaults 120 s, 3 rounds)
#   A3G_BINARY=PATH measures that a3g binary instead of this tree's.
#   FLAGS='...' adds flags to both sides (e.g. '--model a3clstm').
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
source "$root/benches/status_rate.sh"
seconds=${1:-120}
rounds=${2:-3}
warm_up=${WARM_UP:-30}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
a3g=${A3G_BINARY:-$root/a3g}
"$a3g" --version >/dev/null
read -r -a extra <<<"${FLAGS:---model universe}"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then native=yes; else native=no; fi
echo "CPU: $cpu, $(nproc) cores; native bf16: $native; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "PongDeterministic-v4, --trainer ga3c ${extra[*]}, $seconds s runs, mean of status lines after $warm_up s"
for round in $(seq 1 "$rounds"); do
    declare -A rate=()
    # Alternate which side goes first, so that a drift in the host's speed falls on both.
    if (( round % 2 )); then order=(fp32 bf16); else order=(bf16 fp32); fi
    for precision in "${order[@]}"; do
        run="$scratch/run"
        rm -rf "$run" && mkdir -p "$run"
        (cd "$run" && "$a3g" train --env PongDeterministic-v4 --trainer ga3c "${extra[@]}" \
            --precision "$precision" --max-time "${seconds}s" --status-interval 5 \
            >out.log 2>err.log) ||
            { echo "round $round, $precision: failed: $(tail -1 "$run/err.log")"; continue 2; }
        rate[$precision]=$(mean_status_rate "$run/out.log" "$warm_up")
        echo "round $round, $precision: ${rate[$precision]} agent steps/s"
    done
    if [[ $native == yes ]]; then
        awk -v a="${rate[bf16]}" -v b="${rate[fp32]}" -v r="$round" \
            'BEGIN { printf "round %d: bf16 %.2fx fp32\n", r, a / b }'
    else
        echo "round $round: no ratio claimed (this CPU emulates bf16)"
    fi
done
(cd "$root" && cargo bench --locked --bench precision 2>/dev/null)
