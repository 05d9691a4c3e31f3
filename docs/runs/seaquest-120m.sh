#!/usr/bin/env bash
# The shipped SeaquestDeterministic-v4 model's run (README's Results), from the
# checkout's root: the GA3C Breakout recipe (the universe network), 120
# minutes on two cores, niced because it shared the machine with development work.
# It ran in three parts, each stopped by the end of a work session or for a test run
# and resumed with `MAX_TIME=<the rest> docs/runs/seaquest-120m.sh --load`: 28.4, 31.2
# and 60 minutes. Its game log (all parts, each one's clock restarting at zero) is
# docs/runs/seaquest-120m_log.
exec nice -n 19 ./a3g train --env SeaquestDeterministic-v4 --model universe --trainer ga3c \
    --workers 32 --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 --lr 3e-4 \
    --max-time "${MAX_TIME:-120m}" --save-max --save-model-dir runs/seaquest-120m/models \
    --load-model-dir runs/seaquest-120m/models --log-dir runs/seaquest-120m/logs \
    --status-interval 60 "$@"
