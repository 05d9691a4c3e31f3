"""Benchmark: environment steps/s of Gymnasium's Box2D tasks on one core, replaying the
episodes of tests/fixtures/box2d_episodes.json (their seeds and actions) through
gym.make, as a user steps them; benches/box2d_steps.sh sets it beside a3g's.
"""

import json
import pathlib
import time

import gymnasium as gym
import numpy as np

MEASURE_SECONDS = 5.0


def main():
    path = pathlib.Path(__file__).resolve().parents[1] / "tests/fixtures/box2d_episodes.json"
    episodes = json.loads(path.read_text())["episodes"]
    envs = [gym.make(episode["id"]) for episode in episodes]
    replays = []
    for episode, env in zip(episodes, envs):
        continuous = env.unwrapped.continuous
        actions = [
            np.asarray(step["action"], dtype=np.float32) if continuous else step["action"]
            for step in episode["steps"]
        ]
        replays.append((env, episode["seed"], actions))
    start = time.perf_counter()
    steps = 0
    while time.perf_counter() - start < MEASURE_SECONDS:
        for env, seed, actions in replays:
            env.reset(seed=seed)
            for action in actions:
                env.step(action)
            steps += len(actions)
    rate = steps / (time.perf_counter() - start)
    print(f"gymnasium {rate:.0f} steps/s ({steps} steps of {len(episodes)} episodes)")


if __name__ == "__main__":
    main()
