#!/usr/bin/python3
"""Time the Python package cumulus against NumPy and PyTorch, in one process, on the same arrays.

    /usr/bin/python3 bench/compare_python.py [--quick] [--out FILE]

cumulus.cumsum / cumprod / sum against numpy.cumsum / numpy.cumprod / chained numpy.add and
torch.cumsum / torch.cumprod / chained torch.add, on large arrays (beyond the caches) and small
ones (where the per-call overhead decides). Every callable gets the same input arrays; small
workloads are timed in batches of calls, large ones call by call, the runtimes taking turns in
each round; the table shows the median time per call. The last lines give the per-call overhead on a 1000-element float32 array:
cumulus's time over NumPy's (the target is at most 1), and both on a 1-element array, where
almost all of the time is overhead.

Use Debian's /usr/bin/python3 (python3-numpy, python3-torch) with cumulus importable (installed
by scripts/examples.sh, or PYTHONPATH=build/python after a build).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
import torch

import cumulus


def per_call(calls: dict, small: bool, quick: bool) -> dict:
    """Median seconds per call of each callable (None stays None). The callables take turns
    in every round, so a change in the machine's load falls on all of them alike."""
    if small:
        batch, rounds = (200, 5) if quick else (2000, 21)
    else:
        batch, rounds = 1, (3 if quick else 7)
    live = {name: f for name, f in calls.items() if f is not None}
    for f in live.values():
        f()  # warm-up: first-touch of results, lazy imports
    times = {name: [] for name in live}
    for _ in range(rounds):
        for name, f in live.items():
            start = time.perf_counter_ns()
            for _ in range(batch):
                f()
            times[name].append((time.perf_counter_ns() - start) / batch / 1e9)
    return {name: statistics.median(times[name]) if name in live else None for name in calls}


def workloads(quick: bool):
    """(label, small, {runtime: callable}); None where the runtime has no kernel."""
    rng = np.random.default_rng(0)
    big = 1 << (22 if quick else 24)
    side = 1024 if quick else 4096

    def floats(shape, dtype=np.float32):
        return rng.uniform(-1, 1, shape).astype(dtype)

    out = []

    def scan(label, x_np, axis, small=False, torch_ok=True, op="cumsum"):
        x_t = torch.from_numpy(x_np)  # the same memory
        c = getattr(cumulus, op)
        n = getattr(np, op)
        t = getattr(torch, op)
        out.append((label, small, {
            "cumulus": lambda: c(x_np, axis),
            "cumulus (torch in)": lambda: c(x_t, axis),
            "NumPy": lambda: n(x_np, axis),
            "PyTorch": (lambda: t(x_t, axis)) if torch_ok else None,
        }))

    scan(f"CumSum f32 [{big >> 20}M]", floats(big), 0)
    scan(f"CumSum f32 [{side},{side}] axis 0", floats((side, side)), 0)
    scan(f"CumSum f32 [{side},{side}] axis 1", floats((side, side)), 1)
    scan(f"CumProd f32 [{big >> 20}M]", rng.uniform(0.999, 1.001, big).astype(np.float32), 0,
         op="cumprod")
    scan(f"CumSum f16 [{big >> 20}M]", floats(big, np.float16), 0, torch_ok=False)
    x_bf = torch.from_numpy(floats(big)).to(torch.bfloat16)
    out.append((f"CumSum bf16 [{big >> 20}M]", False, {
        "cumulus": None,
        "cumulus (torch in)": lambda: cumulus.cumsum(x_bf, 0),
        "NumPy": None,
        "PyTorch": lambda: torch.cumsum(x_bf, 0),
    }))
    scan(f"CumSum i32 [{big >> 20}M]", rng.integers(-100, 101, big).astype(np.int32), 0)

    def add(label, shapes, small=False):
        arrays = [floats(s) for s in shapes]
        tensors = [torch.from_numpy(a) for a in arrays]

        def np_chain():
            r = np.add(arrays[0], arrays[1])
            for a in arrays[2:]:
                np.add(r, a, out=r)
            return r

        def torch_chain():
            r = torch.add(tensors[0], tensors[1])
            for a in tensors[2:]:
                r.add_(a)
            return r

        out.append((label, small, {
            "cumulus": lambda: cumulus.sum(*arrays),
            "cumulus (torch in)": lambda: cumulus.sum(*tensors),
            "NumPy": np_chain,
            "PyTorch": torch_chain,
        }))

    add(f"Sum f32 3 x [{side},{side}]", [(side, side)] * 3)
    add(f"Sum f32 [{side},{side}] + [{side}] + scalar", [(side, side), (side,), ()])
    scan("CumSum f32 [1000]", floats(1000), 0, small=True)
    scan("CumProd f32 [1000]", rng.uniform(0.99, 1.01, 1000).astype(np.float32), 0,
         small=True, op="cumprod")
    add("Sum f32 2 x [1000]", [(1000,)] * 2, small=True)
    add("Sum f32 3 x [1000]", [(1000,)] * 3, small=True)
    scan("CumSum f32 [1] (overhead)", floats(1), 0, small=True)
    add("Sum f32 2 x [1] (overhead)", [(1,)] * 2, small=True)
    return out


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    us = seconds * 1e6
    return f"{us:.2f} us" if us < 1000 else f"{us / 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller arrays, fewer rounds")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    torch.set_num_threads(cumulus.num_threads())  # the same threads for both

    runtimes = ["cumulus", "cumulus (torch in)", "NumPy", "PyTorch"]
    rows = []
    results = {}
    for label, small, calls in workloads(args.quick):
        times = per_call(calls, small, args.quick)
        results[label] = times
        best_cumulus = min(t for t in (times["cumulus"], times["cumulus (torch in)"]) if t)
        ratios = []
        for peer in ("NumPy", "PyTorch"):
            ratios.append(f"{times[peer] / best_cumulus:.2f}x" if times[peer] else "n/a")
        rows.append(f"| {label} | " + " | ".join(fmt_time(times[r]) for r in runtimes)
                    + " | " + " | ".join(ratios) + " |")
        print(rows[-1], flush=True)

    header = ("| workload | " + " | ".join(runtimes) + " | vs NumPy | vs PyTorch |\n"
              "|---|" + "---:|" * (len(runtimes) + 2))
    cs = results["CumSum f32 [1000]"]
    one = results["CumSum f32 [1] (overhead)"]
    s2 = results["Sum f32 2 x [1000]"]
    lines = [
        f"cumulus {cumulus.__version__}, {cumulus.kernel_isa()} kernels, "
        f"{cumulus.num_threads()} threads; NumPy {np.__version__}; PyTorch {torch.__version__} "
        f"({torch.get_num_threads()} threads); Python {platform.python_version()}; "
        f"{platform.processor() or platform.machine()}",
        "",
        header,
        *rows,
        "",
        f"Per-call time on a 1000-element float32 array, cumulus over NumPy: "
        f"cumsum {cs['cumulus'] / cs['NumPy']:.2f}, sum of 2 vs numpy.add "
        f"{s2['cumulus'] / s2['NumPy']:.2f}; on a 1-element array (all overhead): cumulus.cumsum "
        f"{fmt_time(one['cumulus'])}, numpy.cumsum {fmt_time(one['NumPy'])} "
        f"(ratio {one['cumulus'] / one['NumPy']:.2f}).",
    ]
    text = "\n".join(lines)
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
