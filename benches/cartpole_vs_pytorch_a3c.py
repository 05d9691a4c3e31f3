"""Runs MorvanZhou's pytorch-A3C (discrete_A3C.py, unchanged) on CartPole-v1 until the
mean length of its last 100 training episodes reaches 475, and prints the wall time.

Their script targets the old gym API and CartPole-v0 with no time limit; a small `gym`
stand-in built on gymnasium gives it CartPole-v1 (500-step limit, which the 475 target
needs) through the old reset/step signatures, and no window. Their `record` is replaced
by one that reports each episode's length instead of a moving average, and their
SharedAdam's integer step count becomes a shared one-element tensor, the form Adam
has required since PyTorch 1.12; everything else (network, loss, shared Adam, 5-step
updates, worker processes) is theirs.

Run through benches/cartpole_vs_pytorch_a3c.sh, which installs the dependencies.
Usage: python3 cartpole_vs_pytorch_a3c.py <checkout of MorvanZhou/pytorch-A3C> <workers>
"""
import collections
import queue
import sys
import time
import types

import gymnasium

TARGET, WINDOW, TIME_LIMIT_S = 475.0, 100, 1800


class OldApiCartPole:
    """CartPole-v1 behind gym's pre-0.26 interface."""

    def __init__(self):
        self.env = gymnasium.make("CartPole-v1")
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.unwrapped = self  # keeps the 500-step limit the target is defined with

    def reset(self):
        observation, _ = self.env.reset()
        return observation

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated or truncated, info

    def render(self):
        pass


def main():
    repo, workers = sys.argv[1], int(sys.argv[2])
    sys.modules["gym"] = types.SimpleNamespace(make=lambda _id: OldApiCartPole())
    sys.path.insert(0, repo)
    import torch
    import torch.multiprocessing as mp

    import discrete_A3C as a3c

    def record(global_ep, _global_ep_r, ep_r, res_queue, _name):
        with global_ep.get_lock():
            global_ep.value += 1
        # Every step rewards 1 except the last, which their worker sets to -1.
        res_queue.put(ep_r + 2)

    a3c.record = record
    a3c.MAX_EP = 10**9
    shared = a3c.Net(a3c.N_S, a3c.N_A)
    shared.share_memory()
    optimizer = a3c.SharedAdam(shared.parameters(), lr=1e-4, betas=(0.92, 0.999))
    for state in optimizer.state.values():
        state["step"] = torch.zeros(()).share_memory_()
    global_ep, global_ep_r, lengths = mp.Value("i", 0), mp.Value("d", 0.0), mp.Queue()
    processes = [
        a3c.Worker(shared, optimizer, global_ep, global_ep_r, lengths, rank)
        for rank in range(workers)
    ]
    started = time.time()
    for process in processes:
        process.start()
    recent = collections.deque(maxlen=WINDOW)
    mean = 0.0
    try:
        while time.time() - started < TIME_LIMIT_S:
            try:
                length = lengths.get(timeout=5)
            except queue.Empty:
                if not any(process.is_alive() for process in processes):
                    sys.exit("pytorch-A3C: every worker process died")
                continue
            recent.append(length)
            mean = sum(recent) / len(recent)
            if len(recent) == WINDOW and mean >= TARGET:
                print(
                    f"pytorch-A3C: 100-episode mean {mean:.1f} after {global_ep.value} "
                    f"episodes in {time.time() - started:.1f} s"
                )
                return
        print(f"pytorch-A3C: 100-episode mean only {mean:.1f} after {TIME_LIMIT_S} s")
    finally:
        for process in processes:
            process.terminate()


if __name__ == "__main__":
    main()
