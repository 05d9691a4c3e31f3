#!/usr/bin/env bash
# The shipped BeamRiderDeterministic-v4 model's run (README's Results), from the
# checkout's root: the GA3C Breakout recipe (the universe network), 120
# minutes on two cores, niced because it shared the machine with development work.
# It ran in two parts, the first stopped by the end of a work session and the second
# resumed with `MAX_TIME=84m docs/runs/beamrider-120m.sh --load`: 36 and 84 minutes.
# Its game log (both parts, each one's clock restarting at zero) is
# docs/runs/beamrider-120m_log.
exec nice -n 19 ./a3g train --env BeamRiderDeterministic-v4 --model universe --trainer ga3c \
    --workers 32 --train-batch 8 --predict-min-batch 8 --predict-timeout-us 2000 --lr 3e-4 \
    --max-time "${MAX_TIME:-120m}" --save-max --save-model-dir runs/beamrider-120m/models \
    --load-model-dir runs/beamrider-120m/models --log-dir runs/beamrider-120m/logs \
    --status-interval 60 "$@"
