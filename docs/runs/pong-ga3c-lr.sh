#!/usr/bin/env bash
# PongDeterministic-v4 with README's batched recipe (GA3C, universe network, defaults
# otherwise) at lr 3e-4 held constant against lr 6e-4 annealed to 0 over 4M agent steps,
# 14 minutes each, alternated, seeds 1 and 2, from the checkout's root, alone on the
# machine (docs/benchmarks.md, "Pong's recipe with the annealed rate"). Models and logs
# go under runs/pong-ga3c-lr/ (move it away before running again: a run refuses to
# replace a model); game logs as docs/runs/pong-ga3c-{anneal,const}-seed{1,2}_log.
set -u
out=runs/pong-ga3c-lr
for seed in 1 2; do
    for variant in anneal const; do
        run=$out/$variant-seed$seed
        mkdir -p "$run"
        if [ "$variant" = anneal ]; then rate=(--lr 6e-4 --lr-anneal --max-steps 4000000); else rate=(--lr 3e-4); fi
        ./a3g train --env PongDeterministic-v4 --model universe --trainer ga3c "${rate[@]}" --seed "$seed" \
            --max-time 14m --save-model-dir "$run/models" --log-dir "$run/logs" --status-interval 10 \
            >"$run/out.log" 2>"$run/err.log"
        echo "$variant seed $seed: exit $?"
    done
done
