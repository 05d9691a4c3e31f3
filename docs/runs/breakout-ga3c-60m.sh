#!/usr/bin/env bash
# BreakoutDeterministic-v4 with the batched trainer, from the checkout's root: GA3C with
# the universe network on block-maximum screens (--model universe-max), 32 agents,
# train batch 8, lr 6e-4 annealed to 0 over 11.5M agent steps (what an hour gives on
# the faster of the AMD hosts), 60 minutes on two cores, alone on the machine. The
# model shipped in trained_models/ is from this run with `MAX_TIME=170m` on a slower
# host, where the 11.5M agent steps took longer (docs/benchmarks.md, "Breakout:
# `--model universe-max` to 11.5M agent steps"); its game log is
# docs/runs/breakout-ga3c-anneal-universe-max-11.5M_log. The flags here put the model
# and logs under runs/breakout-ga3c-60m; move the last run's away first, since a run
# without --load refuses to replace a model there.
# Earlier runs: `MODEL=universe MAX_STEPS=10000000` gives the 2026-11-28 run of the
# bilinear screen (docs/runs/breakout-ga3c-anneal-60m_log), with `LR=3e-4 ANNEAL=no`
# the same day's run at the older constant rate (docs/runs/breakout-ga3c-60m_log), and
# `MODEL=universe` alone the later run annealed over what an hour gives
# (docs/runs/breakout-ga3c-anneal11.5M-60m_log), with `LR=1e-3` the one stopped at 19
# minutes. `MAX_STEPS=none` anneals over the hour itself (--max-time) instead of over
# agent steps, so that a host slower than the fast AMD one still ends the hour at rate
# 0 (docs/benchmarks.md, "Breakout: the anneal's horizon on a slow host").
anneal=(--lr-anneal --max-steps "${MAX_STEPS:-11500000}")
[ "${MAX_STEPS:-}" = none ] && anneal=(--lr-anneal)
[ "${ANNEAL:-yes}" = no ] && anneal=()
exec ./a3g train --env BreakoutDeterministic-v4 --model "${MODEL:-universe-max}" --trainer ga3c --workers 32 \
    --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 \
    --lr "${LR:-6e-4}" "${anneal[@]}" --seed "${SEED:-1}" --max-time "${MAX_TIME:-60m}" --save-max \
    --save-model-dir runs/breakout-ga3c-60m/models --load-model-dir runs/breakout-ga3c-60m/models \
    --log-dir runs/breakout-ga3c-60m/logs --status-interval 10 "$@"
