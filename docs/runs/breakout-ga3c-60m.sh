#!/usr/bin/env bash
# BreakoutDeterministic-v4 with the batched trainer, from the checkout's root: GA3C with
# the universe network, 32 agents, train batch 8, lr 6e-4 annealed to 0 over 10M agent
# steps, 60 minutes on two cores, alone on the machine. It ran in one part, from a folder
# of its own with the default model and log folders; the flags here put them under runs/
# instead. Its game log is docs/runs/breakout-ga3c-anneal-60m_log. `LR=3e-4 ANNEAL=no`
# gives the same day's run at the older constant rate (docs/runs/breakout-ga3c-60m_log),
# after moving the last run's runs/breakout-ga3c-60m away, since a run without --load
# refuses to replace a model there. `MAX_STEPS=11500000` gives the later run annealed over
# what an hour gives (docs/runs/breakout-ga3c-anneal11.5M-60m_log), and with `LR=1e-3` the
# one stopped at 19 minutes. `MODEL=universe-max` trains the same network on block-maximum
# screens (docs/benchmarks.md, "Breakout: block-maximum screens for an hour").
anneal=(--lr-anneal --max-steps "${MAX_STEPS:-10000000}")
[ "${ANNEAL:-yes}" = no ] && anneal=()
exec ./a3g train --env BreakoutDeterministic-v4 --model "${MODEL:-universe}" --trainer ga3c --workers 32 \
    --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 \
    --lr "${LR:-6e-4}" "${anneal[@]}" --seed "${SEED:-1}" --max-time "${MAX_TIME:-60m}" --save-max \
    --save-model-dir runs/breakout-ga3c-60m/models --load-model-dir runs/breakout-ga3c-60m/models \
    --log-dir runs/breakout-ga3c-60m/logs --status-interval 10 "$@"
