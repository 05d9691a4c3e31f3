"""The same measurement as benches/model_step.rs, in PyTorch on one thread: the
reference's Atari model (four conv + max-pool + ReLU layers, an LSTM cell of 512, critic
and actor heads), 20 forward passes with autograd, then one backward pass.

Run: PYTHONPATH=.deps/torch taskset -c 0 python3 benches/model_step.py
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROLLOUT, WARM_UP_ROLLOUTS, ROLLOUTS = 20, 5, 40


class ReferenceModel(nn.Module):
    def __init__(self, hidden=512, actions=6):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, stride=1, padding=2)
        self.conv2 = nn.Conv2d(32, 32, 5, stride=1, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 4, stride=1, padding=1)
        self.conv4 = nn.Conv2d(64, 64, 3, stride=1, padding=1)
        self.lstm = nn.LSTMCell(1024, hidden)
        self.critic_linear = nn.Linear(hidden, 1)
        self.actor_linear = nn.Linear(hidden, actions)

    def forward(self, screen, state):
        x = screen
        for conv in (self.conv1, self.conv2, self.conv3, self.conv4):
            x = F.relu(F.max_pool2d(conv(x), 2, 2))
        hidden, cell = self.lstm(x.view(1, -1), state)
        return self.critic_linear(hidden), self.actor_linear(hidden), (hidden, cell)


def universe_lstm_inputs(side):
    """The LSTM's input width in UniverseModel over a side x side screen: 32 maps after
    four stride-2 convolutions, each halving the side (rounding up)."""
    for _ in range(4):
        side = (side + 1) // 2
    return 32 * side * side


class UniverseModel(nn.Module):
    """ikostrikov/pytorch-a3c's network (a3g's --model universe): four 3x3 stride-2
    convolutions of 32 filters with ELU over a 1x42x42 screen, then an LSTM cell;
    with side=84, a3g's --model universe84."""

    def __init__(self, hidden=256, actions=6, side=42):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.conv4 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.lstm = nn.LSTMCell(universe_lstm_inputs(side), hidden)
        self.critic_linear = nn.Linear(hidden, 1)
        self.actor_linear = nn.Linear(hidden, actions)

    def forward(self, screen, state):
        x = screen
        for conv in (self.conv1, self.conv2, self.conv3, self.conv4):
            x = F.elu(conv(x))
        hidden, cell = self.lstm(x.view(1, -1), state)
        return self.critic_linear(hidden), self.actor_linear(hidden), (hidden, cell)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = ReferenceModel()
    screens = [torch.randn(1, 1, 80, 80) for _ in range(ROLLOUT)]
    forward_ms, backward_ms = [], []
    for rollout in range(WARM_UP_ROLLOUTS + ROLLOUTS):
        started = time.perf_counter()
        state = (torch.zeros(1, 512), torch.zeros(1, 512))
        loss = torch.zeros(())
        for screen in screens:
            value, logits, state = model(screen, state)
            loss = loss + value.sum() - F.log_softmax(logits, -1)[:, 0].sum()
        forward = time.perf_counter() - started
        model.zero_grad()
        loss.backward()
        total = time.perf_counter() - started
        if rollout >= WARM_UP_ROLLOUTS:
            forward_ms.append(forward * 1e3 / ROLLOUT)
            backward_ms.append((total - forward) * 1e3 / ROLLOUT)
    forward, backward = sorted(forward_ms)[ROLLOUTS // 2], sorted(backward_ms)[ROLLOUTS // 2]
    print(
        f"PyTorch {torch.__version__}, one thread, median per agent step over {ROLLOUTS} "
        f"rollouts of {ROLLOUT}: forward {forward:.2f} ms, backward {backward:.2f} ms, "
        f"total {forward + backward:.2f} ms"
    )


if __name__ == "__main__":
    main()
