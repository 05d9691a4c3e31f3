#!/usr/bin/env bash
# The GPU sessions' measurements (docs/benchmarks.md, "The first GPU run" and "Pong
# learned on one GPU"), for a machine with one NVIDIA GPU and 16 or so cores: the GPU-side
# unit tests, CartPole-v1 on --gpu-ids 0, Pong with the reference network as A3G on the
# GPU, as A3C on the CPU cores and as GA3C on the GPU (fp32 and bf16), two ranks on the
# one GPU (refused), Pong with README's universe recipe on the GPU, and two longer Pong
# runs timed to their first 18+ game (the second lease: the reference network under GA3C
# in bf16, and the universe network with a short segment queue and two trainers); the
# third lease's four Breakout runs sharing the GPU (breakout-lambda, "Breakout's GAE
# lambda on a GPU machine"). Every step is bounded; a step that fails leaves its log and
# the next one runs.
#
#   benches/gpu_session.sh LOGS        # a3g: A3G_BIN (default target/release/a3g)
#
# Environment: A3G_BIN, A3G_LIB_TESTS (a lib test binary, `cargo test --release --lib
# --no-run` prints its path; skipped when unset), SCALE (multiplies every duration,
# default 1), STEPS (the steps to run, by name, space-separated: each `run` line's
# first argument, ranks-one-gpu and breakout-lambda; default all, but a lease of 15 minutes holds only
# some; the device check and the unit tests run whatever STEPS says). With a binary
# built elsewhere, LD_LIBRARY_PATH names the machine's libtorch (docs/gpu.md, "Running a
# built binary on another machine").
set -u
logs=${1:?usage: benches/gpu_session.sh LOGS}
a3g=${A3G_BIN:-target/release/a3g}
scale=${SCALE:-1}
mkdir -p "$logs"
models=$(mktemp -d)
started=$SECONDS
say() { printf '[%3ds] %s\n' $((SECONDS - started)) "$*"; }
seconds() { awk -v s="$1" -v k="$scale" 'BEGIN { printf "%d", s * k }'; }

nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores"
if ! timeout 60 "$a3g" devices >"$logs/devices.txt" 2>&1 || ! grep -q 'cuda:0' "$logs/devices.txt"; then
    cat "$logs/devices.txt"
    say "a3g sees no GPU: stopping"
    exit 1
fi
cat "$logs/devices.txt"

sample() { nvidia-smi -i 0 --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -l 1 >"$1" 2>/dev/null & sampler=$!; }
# GPU utilisation over the samples taken while the run held GPU memory (start-up left out).
gpu_stats() { awk -F', *' '$1 ~ /^[0-9]+$/ { m = ($2 > m ? $2 : m); if ($2 > 100) { u += $1; n++ } } END { if (n) printf "GPU util mean %.0f%%, memory max %d MiB", u / n, m }' "$1"; }
# Agent steps/s and frames/s between the first and last status lines.
rates() {
    sed -nE 's/^\[([0-9]+)h ([0-9]+)m ([0-9]+)s\] agent steps ([0-9]+), emulator frames ([0-9]+),.*/\1 \2 \3 \4 \5/p' "$1" |
        awk 'NR == 1 { t0 = $1 * 3600 + $2 * 60 + $3; s0 = $4; f0 = $5 }
             { t = $1 * 3600 + $2 * 60 + $3; s = $4; f = $5 }
             END { if (t > t0) printf "%.0f agent steps/s, %.0f frames/s over %d s", (s - s0) / (t - t0), (f - f0) / (t - t0), t - t0; else print "no rate" }'
}
chosen() { [[ -z ${STEPS:-} || " $STEPS " == *" $1 "* ]]; }
# run NAME SECONDS FLAGS...: a3g train for SECONDS (scaled), with GPU sampling.
run() {
    chosen "$1" || return 0
    local name=$1 time; time=$(seconds "$2"); shift 2
    say "$name: a3g train $* --max-time ${time}s"
    sample "$logs/$name.gpu.csv"
    timeout -k 10 $((time + 20)) "$a3g" train --save-model-dir "$models/$name" --log-dir "$logs/$name" --overwrite \
        --status-interval 10 --seed 1 --max-time "${time}s" "$@" >"$logs/$name.out" 2>"$logs/$name.err"
    local rc=$?
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    say "  rc $rc; $(rates "$logs/$name.out"); $(gpu_stats "$logs/$name.gpu.csv")"
    grep -E '^\[' "$logs/$name.out" | tail -1 | cut -c1-600
    tail -1 "$logs/$name.err" | cut -c1-300
    if [[ $* == *Pong* ]]; then
        say "  first 18+: $(grep -m1 -E 'episode reward (1[89]|2[01])' "$logs/$name.out")"
        say "  test games: $(grep -oE 'episode reward -?[0-9]+' "$logs/$name.out" | awk '{ printf "%s ", $3 }')"
    fi
}

if [[ -n ${A3G_LIB_TESTS:-} ]]; then
    timeout 90 "$A3G_LIB_TESTS" worker:: gradients:: precision:: device:: --test-threads 4 >"$logs/libtests.txt" 2>&1
    say "GPU-side unit tests: rc $?: $(grep 'test result' "$logs/libtests.txt")"
fi
run cartpole-gpu 70 --env CartPole-v1 --workers 2 --hidden-size 64 --lr 1e-3 --stop-at-mean 475 --gpu-ids 0
run pong-a3g-gpu 50 --env PongDeterministic-v4 --workers 32 --gpu-ids 0
run pong-a3c-cpu 50 --env PongDeterministic-v4 --workers 16 --gpu-ids -1
run pong-ga3c-gpu 45 --env PongDeterministic-v4 --trainer ga3c --gpu-ids 0
run pong-ga3c-gpu-bf16 35 --env PongDeterministic-v4 --trainer ga3c --gpu-ids 0 --precision bf16

if chosen ranks-one-gpu; then
    say "two ranks on the one GPU: refused on one line"
    port=$((29500 + RANDOM % 10000))
    for rank in 0 1; do
        RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            timeout -k 5 40 "$a3g" train --env CartPole-v1 --workers 2 --hidden-size 64 --max-time 20s --sync-timeout 15 \
            --gpu-ids 0 --save-model-dir "$models/nccl$rank" --log-dir "$logs/nccl$rank" --overwrite \
            >"$logs/nccl$rank.out" 2>"$logs/nccl$rank.err" &
    done
    wait
    for rank in 0 1; do say "  rank $rank: $(tail -1 "$logs/nccl$rank.err" | cut -c1-300)"; done
fi

run pong-universe-ga3c-gpu 180 --env PongDeterministic-v4 --model universe --trainer ga3c --lr 3e-4 --gpu-ids 0 --workers 128 --train-batch 16
run pong-ga3c-bf16-learn 220 --env PongDeterministic-v4 --trainer ga3c --gpu-ids 0 --precision bf16
run pong-universe-queue-learn 190 --env PongDeterministic-v4 --model universe --trainer ga3c --lr 3e-4 --gpu-ids 0 \
    --workers 64 --train-batch 16 --segment-queue 32 --trainers 2

# Breakout's annealed recipe (docs/runs/breakout-ga3c-60m.sh) with GAE lambda 1.0 and
# 0.95, seeds 1 and 2, four runs at once, each pinned to its own four cores with its
# network on the one GPU, so that all four share one load; compared per agent step.
if chosen breakout-lambda; then
    if (($(nproc) < 16)); then
        say "breakout-lambda: needs 16 cores for four runs of four, this machine has $(nproc): skipped"
    else
        time=$(seconds 510)
        say "breakout-lambda: four Breakout runs of ${time}s on the one GPU"
        sample "$logs/breakout-lambda.gpu.csv"
        slot=0
        runs=()
        for seed in 1 2; do
            for tau in 1.0 0.95; do
                name=tau$tau-seed$seed
                first=$((slot * 4))
                taskset -c "$first-$((first + 3))" timeout -k 10 $((time + 30)) "$a3g" train \
                    --env BreakoutDeterministic-v4 --model universe --trainer ga3c --workers 32 \
                    --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 \
                    --lr 6e-4 --lr-anneal --max-steps 11500000 --tau "$tau" --seed "$seed" \
                    --gpu-ids 0 --max-time "${time}s" --status-interval 10 --overwrite \
                    --save-model-dir "$models/$name" --log-dir "$logs/$name" \
                    >"$logs/$name.out.log" 2>"$logs/$name.err" &
                runs+=($!)
                slot=$((slot + 1))
            done
        done
        wait "${runs[@]}"
        kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
        say "  $(gpu_stats "$logs/breakout-lambda.gpu.csv")"
        for run in "$logs"/tau*.out.log; do
            name=$(basename "$run" .out.log)
            say "  $name: $(rates "$run")"
            tail -1 "$logs/$name.err" | cut -c1-300
            awk -F', ' -v goal=20 -v window=100 -v steps=1000000,2000000,3000000,4000000,5000000 \
                -f "$(dirname "$0")/game_log_summary.awk" "$run" "$logs/$name/BreakoutDeterministic-v4_log"
        done
    fi
fi
rm -rf "$models"
