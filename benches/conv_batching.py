"""What batching can save on the reference model's conv stack, on one CPU core: the
bound on GA3C's gain over A3C with that network (docs/benchmarks.md, "GA3C against
A3C").

Times per screen, PyTorch on one thread, conv weights channels-last as a3g keeps them:
- the forward pass without a graph, at the batch sizes a predictor runs;
- the backward pass from activations kept by that forward pass (the conv's own
  backward, through the max-pool indices and the ReLU masks): what a trainer would
  pay if it did not run the convolutions again;
- the forward and backward pass with autograd, what a GA3C trainer pays today
  (and, at batch 1, about what an A3C worker pays).
Each with the multiply-adds it does, as GFLOP/s.

Run: PYTHONPATH=.deps/torch taskset -c 0 python3 benches/conv_batching.py
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# in channels, out channels, kernel, padding; each conv then 2x2 max-pool, then ReLU.
LAYERS = [(1, 32, 5, 2), (32, 32, 5, 1), (32, 64, 4, 1), (64, 64, 3, 1)]


def multiply_adds(backward):
    """Per screen: the forward pass's, or the backward pass's (weight gradients of
    every layer, input gradients of all but the first)."""
    side, total = 80, 0
    for index, (inputs, outputs, kernel, padding) in enumerate(LAYERS):
        out_side = side + 2 * padding - kernel + 1
        macs = out_side * out_side * outputs * inputs * kernel * kernel
        total += macs * (1 + (index > 0)) if backward else macs
        side = out_side // 2
    return total


def convs():
    layers = [nn.Conv2d(i, o, k, 1, p) for i, o, k, p in LAYERS]
    for layer in layers:
        layer.to(memory_format=torch.channels_last)
    return layers


def forward_keeping(layers, x):
    kept, indices = [x], []
    for layer in layers:
        pooled, index = F.max_pool2d_with_indices(layer(x), 2, 2)
        x = F.relu(pooled)
        kept.append(x)
        indices.append(index)
    return kept, indices


def backward_from_kept(layers, kept, indices, gradient):
    for index in reversed(range(len(layers))):
        layer, (_, outputs, kernel, padding) = layers[index], LAYERS[index]
        gradient = gradient * (kept[index + 1] > 0)
        side = kept[index].shape[2] + 2 * padding - kernel + 1
        conv_output = torch.empty(kept[index].shape[0], outputs, side, side).contiguous(
            memory_format=torch.channels_last)
        gradient = torch.ops.aten.max_pool2d_with_indices_backward(
            gradient, conv_output, [2, 2], [2, 2], [0, 0], [1, 1], False, indices[index])
        gradient, _, _ = torch.ops.aten.convolution_backward(
            gradient, kept[index], layer.weight, [outputs], [1, 1], [padding, padding],
            [1, 1], False, [0, 0], 1, [index > 0, True, True])


def forward_backward(layers, x, gradient):
    for layer in layers:
        layer.zero_grad()
    for layer in layers:
        x = F.relu(F.max_pool2d(layer(x), 2, 2))
    (x * gradient).sum().backward()


def seconds(work, repeats):
    for _ in range(2):
        work()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(repeats):
            work()
        best = min(best, (time.perf_counter() - started) / repeats)
    return best


def report(what, rows, elapsed, macs):
    per_screen = elapsed / rows
    print(f"{what}, {rows} screens: {per_screen * 1e3:.2f} ms per screen, "
          f"{2 * macs / per_screen / 1e9:.0f} GFLOP/s")


def main():
    torch.set_num_threads(1)
    torch.manual_seed(1)
    layers = convs()
    print(f"PyTorch {torch.__version__}, one thread; per screen {multiply_adds(False) / 1e6:.1f}M "
          f"multiply-adds forward, {multiply_adds(True) / 1e6:.1f}M backward")
    for rows in [1, 16, 32]:
        x = torch.randn(rows, 1, 80, 80)
        with torch.no_grad():
            report("forward, no graph", rows, seconds(lambda: forward_keeping(layers, x), 48 // rows),
                   multiply_adds(False))
    for rows in [1, 32, 64, 160]:
        x = torch.randn(rows, 1, 80, 80)
        with torch.no_grad():
            kept, indices = forward_keeping(layers, x)
            gradient = torch.randn_like(kept[-1])
            report("backward from kept activations", rows,
                   seconds(lambda: backward_from_kept(layers, kept, indices, gradient), 3),
                   multiply_adds(True))
        report("forward and backward, autograd", rows,
               seconds(lambda: forward_backward(layers, x, gradient), 3),
               multiply_adds(False) + multiply_adds(True))


if __name__ == "__main__":
    main()
