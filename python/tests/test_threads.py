"""The GIL is released while the kernels run, and calls from several threads are safe."""

import sys
import threading

import numpy as np
import pytest

import cumulus


# NumPy inputs only: torch's DLPack export gives up the GIL itself, which would let the worker
# count without cumulus's help (torch inputs take the same path through cumulus).
@pytest.mark.parametrize("call", ["cumsum", "cumprod", "sum", "run"])
def test_other_threads_run_while_a_kernel_runs(call):
    """With a switch interval of 1000 s the GIL changes hands only where a thread gives it up.
    The worker can count only if a cumulus call gives it up: were the GIL kept, the count seen
    right after the calls would be 0, whatever the timing."""
    x = np.ones(1 << 22, np.float32)
    import cumulus.onnx
    from test_onnx import scan_model
    model = cumulus.onnx.load(scan_model())
    calls = {
        "cumsum": lambda: cumulus.cumsum(x),
        "cumprod": lambda: cumulus.cumprod(x, 0, reverse=True),
        "sum": lambda: cumulus.sum(x, x, x),
        "run": lambda: model.run({"x": x, "axis": np.array(0)}),
    }
    f = calls[call]
    cumulus.set_num_threads(1)  # leave the other core to the worker
    counter = [0]
    go = threading.Event()

    def worker():
        go.wait()  # gives up the GIL until set
        for _ in range(1000):
            counter[0] += 1

    thread = threading.Thread(target=worker)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        thread.start()  # returns once the worker waits on `go`
        go.set()
        for _ in range(100):  # nothing here gives up the GIL but the cumulus calls
            f()
            if counter[0]:
                break
        seen = counter[0]
    finally:
        sys.setswitchinterval(old)
    thread.join()
    assert seen == 1000


@pytest.mark.parametrize("threads", [1, 2])
def test_concurrent_calls_are_correct(threads, rng):
    """Eight Python threads, started together, each check their own results."""
    cumulus.set_num_threads(threads)
    inputs = [rng.integers(-100, 100, (200, 300)).astype(np.float64) for _ in range(8)]
    long_row = rng.integers(-8, 9, 200_000).astype(np.float32)
    barrier = threading.Barrier(len(inputs))
    failures = []

    def work(k):
        a = inputs[k]
        barrier.wait()
        try:
            for _ in range(20):
                np.testing.assert_array_equal(cumulus.cumsum(a, k % 2), np.cumsum(a, k % 2))
                np.testing.assert_array_equal(cumulus.sum(a, a[0]), a + a[0])
                np.testing.assert_array_equal(cumulus.cumsum(long_row),
                                              np.cumsum(long_row, dtype=np.float64))
        except AssertionError as e:
            failures.append(e)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures


def test_results_do_not_depend_on_threads(rng):
    x = rng.standard_normal((3, 200_000)).astype(np.float32)
    results = []
    for threads in (1, 2, 3):
        cumulus.set_num_threads(threads)
        assert cumulus.num_threads() == threads
        results.append((cumulus.cumsum(x, 1), cumulus.cumprod(x[:, :64], 1), cumulus.sum(x, x[0])))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert a.tobytes() == b.tobytes()


def _scan_in_child(x):
    return cumulus.num_threads(), cumulus.cumsum(x)


def test_forked_processes_scan_on_their_own_threads():
    """multiprocessing forks by default on Linux (so do Dask's process workers and PyTorch's
    DataLoader): a child has none of the parent's worker threads, and must not wait for them."""
    import multiprocessing
    x = np.random.default_rng(5).standard_normal(1 << 20).astype(np.float32)
    cumulus.set_num_threads(2)
    expected = cumulus.cumsum(x)  # the parent's workers run now
    with multiprocessing.get_context("fork").Pool(1) as pool:
        threads, got = pool.apply_async(_scan_in_child, (x,)).get(timeout=120)
    assert threads == 2
    np.testing.assert_array_equal(got, expected)
