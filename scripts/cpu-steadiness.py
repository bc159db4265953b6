#!/usr/bin/env python3
"""How steady this machine's CPU is right now: a fixed piece of work (1-2 ms) run back
to back for SECONDS (default 5) on one core, and the share of pieces that took at least
twice the median. On a shared VM the host's other load slows the whole guest for tens of
milliseconds at a time, and those stalls, not the code measured, set a p99 of a few ms.
Prints one line for a benchmark's output, beside the latency figure it came before."""
import statistics
import sys
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0


def piece(n):
    x = 0
    for i in range(n):
        x += i
    return x


n = 1000
while True:  # calibrate: about 1 ms a piece
    start = time.perf_counter()
    piece(n)
    if time.perf_counter() - start >= 0.001:
        break
    n *= 2
times = []
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    start = time.perf_counter()
    piece(n)
    times.append(time.perf_counter() - start)
median = statistics.median(times)
slow = [t >= 2 * median for t in times]
longest = run = 0.0
for t, is_slow in zip(times, slow):
    run = run + t if is_slow else 0.0
    longest = max(longest, run)
print(f"  the CPU just before (scripts/cpu-steadiness.py, {seconds:g} s): {100 * sum(slow) / len(times):.1f} % of "
      f"{median * 1000:.1f} ms pieces ran at half speed or slower, the longest such stretch {longest * 1000:.0f} ms")
