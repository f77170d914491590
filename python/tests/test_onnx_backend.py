"""ONNX's own backend test runner (onnx.backend.test, onnx 1.12) runs its CumSum and Sum node
tests through cumulus.onnx.backend, comparing as it always does."""

import unittest

import numpy as np

# onnx 1.12's runner compares with `ref.dtype == np.object`, which NumPy 1.24 removed; the
# alias is what NumPy itself had (np.object was the builtin object), so nothing is weakened.
if "object" not in np.__dict__:
    np.object = object

import onnx.backend.test  # noqa: E402

import cumulus.onnx  # noqa: E402

PATTERN = r"^test_(cumsum|sum)_.*_cpu$"
EXPECTED = {"test_cumsum_1d", "test_cumsum_1d_exclusive", "test_cumsum_1d_reverse",
            "test_cumsum_1d_reverse_exclusive", "test_cumsum_2d_axis_0", "test_cumsum_2d_axis_1",
            "test_cumsum_2d_negative_axis", "test_sum_example", "test_sum_one_input",
            "test_sum_two_inputs"}


def backend_test():
    test = onnx.backend.test.BackendTest(cumulus.onnx.backend, __name__)
    test.include(PATTERN)
    return test


# Each node test as its own pytest case, as ONNX documents for backends (the runner marks the
# ones the pattern leaves out as skipped).
OnnxBackendNodeModelTest = backend_test().test_cases["OnnxBackendNodeModelTest"]


def test_every_node_test_runs_and_passes():
    """None skipped (is_compatible and supports_device could skip them), none failed."""
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(case)
                               for case in backend_test().test_cases.values())
    ids = [t.id() for t in _tests(suite)]  # before running, which empties the suite
    result = unittest.TextTestRunner(verbosity=0).run(suite)
    skipped = {t.id() for t, _ in result.skipped}
    ran = {i.rsplit(".", 1)[-1].removesuffix("_cpu") for i in ids if i not in skipped}
    assert ran == EXPECTED
    assert result.wasSuccessful(), (result.failures, result.errors)


def _tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _tests(t)
        else:
            yield t


def test_run_node_and_devices():
    from onnx import helper
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1)
    (y,) = cumulus.onnx.backend.run_node(node, [np.array([1.0, 2.0, 3.0]), np.array(0)])
    np.testing.assert_array_equal(y, [0.0, 1.0, 3.0])
    assert cumulus.onnx.backend.supports_device("CPU")
    assert not cumulus.onnx.backend.supports_device("CUDA")
