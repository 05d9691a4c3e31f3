#!/usr/bin/env bash
# BreakoutDeterministic-v4's A3C hour (docs/benchmarks.md; README's model until the
# batched trainer's annealed hour, docs/runs/breakout-ga3c-60m.sh), from the checkout's
# root: A3C with the universe network, 8 workers, lr 3e-4, 60 minutes on two
# cores, alone on the machine. It ran in one part, from a folder of its own with the
# default model and log folders; the flags here put them under runs/ instead. Its game
# log is docs/runs/breakout-a3c-60m_log. `SEED=2` gives the second seed's run and
# `LR=6e-4` the faster rate's (stopped at 21 minutes), each after moving the last run's
# runs/breakout-a3c-60m away, since a run without --load refuses to replace a model there.
exec ./a3g train --env BreakoutDeterministic-v4 --model universe --trainer a3c --workers 8 \
    --lr "${LR:-3e-4}" --seed "${SEED:-1}" --max-time "${MAX_TIME:-60m}" --save-max \
    --save-model-dir runs/breakout-a3c-60m/models --load-model-dir runs/breakout-a3c-60m/models \
    --log-dir runs/breakout-a3c-60m/logs --status-interval 10 "$@"
