"""A one-way delay for every packet routed through a TUN device, for
benches/netns_links.sh: this machine's kernel has no sch_netem, so the packets
between the ranks' namespaces take a detour through this process, which holds each
for the delay and gives it back to the kernel to route on.

Usage: python3 benches/link_delay.py DEVICE MICROSECONDS  (the device already up)
"""

import collections
import ctypes
import fcntl
import os
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
PR_SET_TIMERSLACK = 29


def attach(device):
    tun = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(tun, TUNSETIFF, struct.pack("16sH", device.encode(), IFF_TUN | IFF_NO_PI))
    return tun


def main():
    device, delay = sys.argv[1], int(sys.argv[2]) / 1e6
    tun = attach(device)
    # The kernel may wake a sleeper up to 50 us late by default, half of a 0.1 ms delay.
    ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    # One delay for every packet, so the packets leave in the order they came.
    held = collections.deque()
    while True:
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        select.select([tun], [], [], timeout)
        now = time.monotonic()
        while True:
            try:
                held.append((now + delay, os.read(tun, 65536)))
            except BlockingIOError:
                break
        while held and held[0][0] <= now:
            os.write(tun, held.popleft()[1])


if __name__ == "__main__":
    main()
