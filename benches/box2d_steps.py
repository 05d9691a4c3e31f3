"""Benchmark: environment steps/s of Gymnasium's Box2D tasks on one core, replaying the
episodes of tests/fixtures/box2d_episodes.json (their seeds and actions) through
gym.make, as a user steps them; benches/box2d_steps.sh sets it beside a3g's.

    python3 benches/box2d_steps.py PREFIX    (the ids starting with PREFIX)
"""

import json
import pathlib
import sys
import time

import gymnasium as gym
import numpy as np

MEASURE_SECONDS = 5.0


def main():
    path = pathlib.Path(__file__).resolve().parents[1] / "tests/fixtures/box2d_episodes.json"
    prefix = sys.argv[1]
    episodes = [e for e in json.loads(path.read_text())["episodes"] if e["id"].startswith(prefix)]
    replays = []
    for episode in episodes:
        actions = [
            np.asarray(step["action"], dtype=np.float32)
            if isinstance(step["action"], list)
            else step["action"]
            for step in episode["steps"]
        ]
        replays.append((gym.make(episode["id"]), episode["seed"], actions))
    start = time.perf_counter()
    steps = 0
    while time.perf_counter() - start < MEASURE_SECONDS:
        for env, seed, actions in replays:
            env.reset(seed=seed)
            for action in actions:
                env.step(action)
            steps += len(actions)
    rate = steps / (time.perf_counter() - start)
    print(f"gymnasium {prefix}: {rate:.0f} steps/s ({steps} steps of {len(episodes)} episodes)")


if __name__ == "__main__":
    main()
