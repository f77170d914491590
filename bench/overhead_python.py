#!/usr/bin/python3
"""Per-call time of cumulus against NumPy on one 1000-element float32 array, where the per-call
overhead decides.

    PYTHONPATH=build/python /usr/bin/python3 bench/overhead_python.py [--rounds R] [--calls N]

cumulus.sum(a, b) vs numpy.add(a, b) (both allocate the result), cumulus.sum(a, b, out=c) vs
numpy.add(a, b, out=c), cumulus.cumsum / cumprod vs numpy.cumsum / cumprod. Each pair is timed in
one process, taking turns round by round; a round times N calls, and the least time per call over
the rounds is kept (the run least disturbed by the machine). Ratio: cumulus over NumPy, the
target being at most 1.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import cumulus


def least_per_call(f, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        f()
    return (time.perf_counter_ns() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(-1, 1, 1000).astype(np.float32) for _ in range(3))
    p = rng.uniform(0.99, 1.01, 1000).astype(np.float32)
    pairs = [
        ("sum(a, b)", lambda: cumulus.sum(a, b), lambda: np.add(a, b)),
        ("sum(a, b, out=c)", lambda: cumulus.sum(a, b, out=c), lambda: np.add(a, b, out=c)),
        ("cumsum(a, 0)", lambda: cumulus.cumsum(a, 0), lambda: np.cumsum(a, 0)),
        ("cumprod(p, 0)", lambda: cumulus.cumprod(p, 0), lambda: np.cumprod(p, 0)),
    ]
    print(f"float32 [1000], least of {args.rounds} rounds x {args.calls} calls")
    print("| call | cumulus | NumPy | ratio |\n|---|---:|---:|---:|")
    for label, ours, theirs in pairs:
        ours(), theirs()  # warm-up
        best = [float("inf"), float("inf")]
        for _ in range(args.rounds):
            best[0] = min(best[0], least_per_call(ours, args.calls))
            best[1] = min(best[1], least_per_call(theirs, args.calls))
        print(f"| {label} | {best[0] / 1e3:.3f} us | {best[1] / 1e3:.3f} us | "
              f"{best[0] / best[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
