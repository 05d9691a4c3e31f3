#!/usr/bin/env bash
# Breakout's GA3C recipe (docs/runs/breakout-ga3c-60m.sh: universe network, 32 agents,
# train batch 8, lr 6e-4 annealed over 11.5M agent steps) with GAE lambda (--tau) 1.0
# against 0.95, seeds 1 and 2: four runs at once on one machine with a GPU, each pinned to
# its own four cores with its network on the shared GPU, so all four run under the same
# load. The comparison is per agent step (docs/benchmarks.md, "Breakout's GAE lambda on
# a GPU machine"); the rates are not two cores'. Four processes on one GPU turned out to
# be bound by their trainers, 1.2M agent steps each in 510 s.
#
#   benches/breakout_lambda_gpu.sh LOGS SECONDS     # a3g: A3G_BIN (default target/release/a3g)
set -u
logs=${1:?usage: benches/breakout_lambda_gpu.sh LOGS SECONDS}
seconds=${2:?usage: benches/breakout_lambda_gpu.sh LOGS SECONDS}
a3g=${A3G_BIN:-target/release/a3g}
here=$(dirname "$0")
mkdir -p "$logs"
models=$(mktemp -d)
cores=$(nproc)
if ((cores < 16)); then
    echo "breakout_lambda_gpu.sh: needs 16 cores for four runs of four, this machine has $cores" >&2
    exit 1
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $cores cores"

slot=0
runs=()
for seed in 1 2; do
    for tau in 1.0 0.95; do
        name=tau$tau-seed$seed
        first=$((slot * 4))
        taskset -c "$first-$((first + 3))" timeout -k 10 $((seconds + 30)) "$a3g" train \
            --env BreakoutDeterministic-v4 --model universe --trainer ga3c --workers 32 \
            --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 \
            --lr 6e-4 --lr-anneal --max-steps 11500000 --tau "$tau" --seed "$seed" \
            --gpu-ids 0 --max-time "${seconds}s" --status-interval 10 --overwrite \
            --save-model-dir "$models/$name" --log-dir "$logs/$name" \
            >"$logs/$name.out.log" 2>"$logs/$name.err" &
        runs+=($!)
        slot=$((slot + 1))
    done
done
nvidia-smi -i 0 --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -l 5 >"$logs/gpu.csv" 2>/dev/null &
sampler=$!
wait "${runs[@]}"
kill "$sampler" 2>/dev/null

for run in "$logs"/tau*.out.log; do
    name=$(basename "$run" .out.log)
    echo "== $name"
    grep -E '^\[' "$run" | tail -1 | cut -c1-300
    tail -1 "$logs/$name.err" | cut -c1-300
    awk -F', ' -v goal=20 -v window=100 -v steps=1000000,2000000,3000000,4000000,5000000 \
        -f "$here/game_log_summary.awk" "$run" "$logs/$name/BreakoutDeterministic-v4_log"
done
rm -rf "$models"
