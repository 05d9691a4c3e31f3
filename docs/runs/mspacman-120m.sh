#!/usr/bin/env bash
# The shipped MsPacmanDeterministic-v4 model's run (README's Results), from the
# checkout's root: the GA3C Breakout recipe (the universe network), 120
# minutes on two cores, niced because it shared the machine with development work.
# It ran in two parts: 42.5 minutes, stopped by the end of a work session, then resumed
# with `MAX_TIME=78m docs/runs/mspacman-120m.sh --load`. Its game log (both parts, the
# second's clock restarting at zero) is docs/runs/mspacman-120m_log.
exec nice -n 19 ./a3g train --env MsPacmanDeterministic-v4 --model universe --trainer ga3c \
    --workers 32 --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 --lr 3e-4 \
    --max-time "${MAX_TIME:-120m}" --save-max --save-model-dir runs/mspacman-120m/models \
    --load-model-dir runs/mspacman-120m/models --log-dir runs/mspacman-120m/logs \
    --status-interval 60 "$@"
