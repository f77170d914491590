"""cumulus.dask against the one-pass result, for several chunkings, on Dask's threaded scheduler
and on a local cluster of two worker processes."""

import subprocess
import sys

import numpy as np
import pytest

import cumulus
from helpers import make, random_values
from reference import INTS, NUMPY_DTYPES
from test_scan import check_scan

da = pytest.importorskip("dask.array")
cdask = pytest.importorskip("cumulus.dask")

SCANS = {"cumsum": (cumulus.cumsum, cdask.cumsum), "cumprod": (cumulus.cumprod, cdask.cumprod)}
SHAPE = (13, 6)
# Chunkings of SHAPE: one chunk, chunks of 1, uneven, and with empty chunks.
CHUNKINGS = [(13, 6), (1, 6), (4, 4), ((5, 0, 1, 7), (2, 0, 4)), ((0, 13), (1, 1, 1, 3))]


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.itemsize}")


def check(op, dtype, x, got, axis, exclusive, reverse):
    one_pass = SCANS[op][0](x, axis, exclusive=exclusive, reverse=reverse)
    assert got.dtype == one_pass.dtype and got.shape == one_pass.shape
    if op == "cumsum" or dtype in INTS:
        np.testing.assert_array_equal(bits(got), bits(one_pass))
    else:
        # A floating cumprod keeps the one-pass promise, checked against the exact product.
        check_scan(op, dtype, x.astype(np.float64), got, axis, exclusive, reverse, "product")


def scans(x, chunks, op):
    a = da.from_array(x, chunks=chunks)
    for axis in (0, 1, -1):
        for exclusive in (False, True):
            for reverse in (False, True):
                r = SCANS[op][1](a, axis, exclusive=exclusive, reverse=reverse)
                assert isinstance(r, da.Array) and r.chunks == a.chunks
                yield r, axis, exclusive, reverse


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_threaded(op, dtype, chunks, rng):
    mode = "product" if op == "cumprod" else "wide"
    x = make(random_values(rng, dtype, SHAPE, mode), dtype)
    for r, axis, exclusive, reverse in scans(x, chunks, op):
        check(op, dtype, x, r.compute(scheduler="threads"), axis, exclusive, reverse)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_long_axis_many_chunks(dtype, rng):
    # 38 chunks: a tree of carries several levels deep, on order-sensitive data (signs and a
    # wide range of magnitudes).
    x = (rng.uniform(-1, 1, (1000, 3)) * np.exp(rng.uniform(-20, 20, (1000, 3)))).astype(dtype)
    a = da.from_array(x, chunks=((27,) * 37 + (1,), 3))
    for reverse in (False, True):
        got = cdask.cumsum(a, 0, reverse=reverse).compute(scheduler="threads")
        np.testing.assert_array_equal(bits(got), bits(cumulus.cumsum(x, 0, reverse=reverse)))


def test_graph_is_log_depth_and_lazy():
    a = da.ones((64,), chunks=1, dtype=np.float64)
    r = cdask.cumsum(a, 0)
    graph = dict(r.__dask_graph__())
    ours = {k: v for k, v in graph.items() if isinstance(k, tuple) and "cumulus" in k[0]}
    # 64 totals, 64 scans and fewer than 2 * 64 combines.
    assert len(ours) < 4 * 64

    def depth(key, memo={}):
        if key not in memo:
            deps = [d for d in _keys_in(graph[key]) if d in ours]
            memo[key] = 1 + max((depth(d) for d in deps), default=0)
        return memo[key]

    assert max(depth(k) for k in ours) <= 2 * 6 + 2
    np.testing.assert_array_equal(r.compute(scheduler="sync"), np.arange(1.0, 65.0))


def _keys_in(task):
    if isinstance(task, tuple) and task and isinstance(task[0], str):
        yield task
    elif isinstance(task, (tuple, list)):
        for t in task:
            yield from _keys_in(t)


def test_sum_broadcasts(rng):
    x = random_values(rng, "float32", (9, 8), "wide").astype(np.float32)
    row = random_values(rng, "float32", (8,), "wide").astype(np.float32)
    col = random_values(rng, "float32", (9, 1), "wide").astype(np.float32)
    r = cdask.sum(da.from_array(x, chunks=(4, 3)), da.from_array(row, chunks=5), col,
                  np.float32(0.25))
    assert isinstance(r, da.Array)
    expected = cumulus.sum(x, row, col, np.float32(0.25))
    np.testing.assert_array_equal(bits(r.compute(scheduler="threads")), bits(expected))


def test_errors_come_at_graph_building():
    a = da.ones((4, 5), chunks=2, dtype=np.float32)
    with pytest.raises(cumulus.InvalidArgumentError, match="axis"):
        cdask.cumsum(a, 2)
    with pytest.raises(cumulus.InvalidArgumentError, match="exclusive"):
        cdask.cumprod(a, 0, exclusive=2)
    with pytest.raises(cumulus.UnsupportedTypeError, match="complex64"):
        cdask.cumsum(da.ones(3, dtype=np.complex64), 0)
    with pytest.raises(cumulus.UnsupportedTypeError):
        cdask.sum(a, da.ones((4, 5), dtype=np.float64))
    with pytest.raises(cumulus.UnsupportedTypeError):
        cdask.sum(da.ones(3, dtype=np.int32))
    with pytest.raises(cumulus.InvalidArgumentError, match="broadcast"):
        cdask.sum(a, da.ones((3,), dtype=np.float32))
    with pytest.raises(cumulus.InvalidArgumentError):
        cdask.sum()


def test_import_cumulus_does_not_import_dask():
    code = "import sys, cumulus; assert 'dask' not in sys.modules; cumulus.dask.cumsum"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    # Worker processes import cumulus from the same path as this process.
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def cluster_cases():
    for dtype, op in [("float32", "cumsum"), ("float16", "cumsum"), ("float64", "cumprod"),
                      ("int64", "cumsum"), ("uint32", "cumprod")]:
        for chunks in CHUNKINGS:
            yield pytest.param(op, dtype, chunks)


@pytest.mark.parametrize("op, dtype, chunks", cluster_cases())
def test_local_cluster(client, op, dtype, chunks, rng):
    mode = "product" if op == "cumprod" else "wide"
    x = make(random_values(rng, dtype, SHAPE, mode), dtype)
    cases = list(scans(x, chunks, op))
    results = client.gather(client.compute([r for r, *_ in cases]))
    for got, (_, axis, exclusive, reverse) in zip(results, cases):
        check(op, dtype, x, got, axis, exclusive, reverse)


def test_local_cluster_sum(client, rng):
    x = random_values(rng, "float64", (10, 7), "wide")
    r = cdask.sum(da.from_array(x, chunks=3), da.from_array(x[0], chunks=2))
    np.testing.assert_array_equal(bits(client.compute(r).result()), bits(cumulus.sum(x, x[0])))
