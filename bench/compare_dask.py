#!/usr/bin/python3
"""Time cumulus.dask.cumsum against Dask's own cumsum (NumPy per chunk) on a local cluster, and
measure each one's error against the exact result.

    /usr/bin/python3 bench/compare_dask.py [--mb 256] [--chunks 16] [--workers 2] [--rounds 3]

A float32 array of --mb megabytes (1-D, values uniform in [-1, 1) plus a small positive drift, so
that the prefix sums grow and cancel) is cut into --chunks chunks and held in the cluster's
memory (persisted); each scan then runs on a distributed.LocalCluster of worker processes bound
to 127.0.0.1, and its result is gathered to this process. The table gives the median of --rounds
wall times; a last row runs cumulus's graph on Dask's threaded scheduler in this process, where
no state crosses a process. Errors are measured against cumulus.cumsum of the whole array in one
pass, which is the exact prefix sum rounded once to float32. They are given in ulps of that
result: the largest
over all elements and the median; "same" says whether every bit matches.

Use Debian's /usr/bin/python3 (python3-dask, python3-distributed) with cumulus importable
(PYTHONPATH=build/python after a build).
"""

from __future__ import annotations

import argparse
import statistics
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait

import cumulus
import cumulus.dask


def ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units in the last place of exact (float32), computed in float64."""
    spacing = np.spacing(np.abs(exact)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact.astype(np.float64)) / spacing


def timed(compute, rounds: int):
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = compute()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="array size in megabytes")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    n = args.mb * (1 << 20) // 4
    rng = np.random.default_rng(0)
    x = (rng.uniform(-1.0, 1.0, n) + 0.01).astype(np.float32)
    exact = cumulus.cumsum(x, 0)

    with LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        chunks = -(-n // args.chunks)
        a = da.from_array(x, chunks=chunks).persist()
        wait(a)
        local = da.from_array(x, chunks=chunks)
        runs = {
            "cumulus.dask.cumsum": lambda: client.compute(cumulus.dask.cumsum(a, 0)).result(),
            "dask a.cumsum (NumPy)": lambda: client.compute(a.cumsum(0)).result(),
            "cumulus.dask, threads": lambda: cumulus.dask.cumsum(local, 0).compute(
                scheduler="threads"),
        }
        print(f"float32, {n} elements ({args.mb} MB), {a.numblocks[0]} chunks, "
              f"{args.workers} worker processes x 1 thread, median of {args.rounds}")
        print(f"{'':24} {'seconds':>8} {'max ulps':>14} {'median ulps':>12} {'same':>6}")
        for label, compute in runs.items():
            seconds, got = timed(compute, args.rounds)
            err = ulps(got, exact)
            same = np.array_equal(got.view(np.uint32), exact.view(np.uint32))
            print(f"{label:24} {seconds:8.2f} {err.max():14.1f} {np.median(err):12.1f} "
                  f"{'yes' if same else 'no':>6}")


if __name__ == "__main__":
    main()
