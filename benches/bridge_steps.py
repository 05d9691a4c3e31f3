"""Microseconds per step of Gymnasium's AsyncVectorEnv (one CartPole-v1 in a
subprocess), random actions, for benches/bridge_steps.rs: prints one number."""

import sys
import time

import gymnasium as gym
import numpy as np

seconds = float(sys.argv[1])
envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")])
envs.reset(seed=1)
action = 0
steps = 0
start = time.perf_counter()
while time.perf_counter() - start < seconds:
    for _ in range(100):
        action = (action * 7 + 3) % 5
        # Episodes reset themselves inside the vector env (autoreset).
        envs.step(np.array([action % 2]))
    steps += 100
print((time.perf_counter() - start) * 1e6 / steps)
envs.close()
