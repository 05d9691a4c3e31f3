#!/usr/bin/env bash
# The shipped SpaceInvadersDeterministic-v4 model's run (README's Results), from the
# checkout's root: the GA3C Breakout recipe (the universe network), 120
# minutes on two cores, niced because it shared the machine with development work.
# Its game log is docs/runs/spaceinvaders-120m_log.
exec nice -n 19 ./a3g train --env SpaceInvadersDeterministic-v4 --model universe --trainer ga3c \
    --workers 32 --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 --lr 3e-4 \
    --max-time 120m --save-max --save-model-dir runs/spaceinvaders-120m/models \
    --log-dir runs/spaceinvaders-120m/logs --status-interval 60 "$@"
