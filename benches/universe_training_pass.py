"""What a GA3C trainer's pass over the universe network's convolutions costs on one
core, in PyTorch (the libtorch a3g links): a batch of 8 segments of 20 screens,
forward and backward, the weights channels-last as a3g keeps them. Compares fp32
with bf16 (what a --precision bf16 would run) and fp32 with glibc's malloc told to
keep freed memory (no page faults on the next allocation).

Run each mode in its own process, alternating, one thread on one core:
    for mode in fp32 bf16 fp32-kept-memory; do
        PYTHONPATH=.deps/torch taskset -c 1 python3 benches/universe_training_pass.py $mode
    done
"""
import ctypes
import resource
import sys
import time

import torch
import torch.nn as nn

MODES = ("fp32", "bf16", "fp32-kept-memory")
mode = sys.argv[1] if len(sys.argv) > 1 else "fp32"
if mode not in MODES:
    sys.exit(f"mode must be one of {', '.join(MODES)}")
if mode == "fp32-kept-memory":
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)
    libc.mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1)
torch.set_num_threads(1)
dtype = torch.bfloat16 if mode == "bf16" else torch.float32

layers = []
for index in range(4):
    layers += [nn.Conv2d(1 if index == 0 else 32, 32, 3, stride=2, padding=1), nn.ELU()]
convs = nn.Sequential(*layers).to(dtype=dtype, memory_format=torch.channels_last)
screens = torch.randn(8 * 20, 1, 42, 42, dtype=dtype)


def training_pass():
    features = convs(screens).flatten(1)
    features.float().sum().backward()


rounds = 5 if mode == "bf16" else 40
for _ in range(3):
    training_pass()
faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
times = []
for _ in range(rounds):
    started = time.perf_counter()
    training_pass()
    times.append(time.perf_counter() - started)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / rounds
times.sort()
print(f"{mode}: {times[len(times) // 2] * 1e3:.1f} ms a pass (median of {rounds}), {faults:.0f} page faults a pass")
