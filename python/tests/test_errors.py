"""Every error: its class (a cumulus.Error and the built-in a Python user catches) and its
one-line message."""

import re

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import cumulus
import cumulus.onnx

SUPPORTED = "float32, float64, float16, bfloat16, int32, int64, uint32, uint64"
x = np.zeros((2, 3), np.float32)


def raises(cls, builtin, message, f, *args, **kwargs):
    """f(*args, **kwargs) raises cls, also a builtin, with exactly `message` (one line)."""
    with pytest.raises(cls) as info:
        f(*args, **kwargs)
    error = info.value
    assert isinstance(error, cumulus.Error) and isinstance(error, builtin)
    assert type(error).__module__ == "cumulus"
    assert str(error) == message
    assert "\n" not in str(error)
    return error


def test_class_tree():
    assert issubclass(cumulus.Error, Exception)
    for cls, builtin in [(cumulus.InvalidArgumentError, ValueError),
                         (cumulus.UnsupportedError, ValueError), (cumulus.ParseError, ValueError),
                         (cumulus.FileError, OSError), (cumulus.LimitError, MemoryError),
                         (cumulus.UnsupportedTypeError, TypeError)]:
        assert issubclass(cls, cumulus.Error) and issubclass(cls, builtin)
        assert cls.__doc__


def test_axis_errors():
    raises(cumulus.InvalidArgumentError, ValueError,
           "CumSum: axis 2 is out of range for input 'x' of rank 2 (shape [2, 3]); valid: [-2, 1]",
           cumulus.cumsum, x, 2)
    raises(cumulus.InvalidArgumentError, ValueError,
           "CumProd: axis -3 is out of range for input 'x' of rank 2 (shape [2, 3]); valid: [-2, 1]",
           cumulus.cumprod, x, -3)
    raises(cumulus.InvalidArgumentError, ValueError,
           "CumSum: input 'x' is a scalar (rank 0), which has no axis to scan along",
           cumulus.cumsum, np.float32(1), 0)
    raises(cumulus.InvalidArgumentError, ValueError,
           "CumSum: axis 1180591620717411303424 is out of range", cumulus.cumsum, x, 2**70)
    raises(cumulus.UnsupportedTypeError, TypeError, "CumSum: axis must be an integer, not float",
           cumulus.cumsum, x, 1.5)


def test_attribute_errors():
    raises(cumulus.InvalidArgumentError, ValueError,
           "CumSum: attribute 'exclusive' must be 0 or 1, not 2", cumulus.cumsum, x, exclusive=2)
    raises(cumulus.UnsupportedTypeError, TypeError,
           "CumProd: attribute 'reverse' must be a bool (or 0 or 1), not str",
           cumulus.cumprod, x, reverse="yes")


@pytest.mark.parametrize("array, name", [(np.zeros(3, np.int8), "int8"),
                                         (np.zeros(3, bool), "bool"),
                                         (np.zeros(3, np.complex64), "complex64"),
                                         (np.zeros(3, np.float128), "float128"),
                                         (["a", "b"], "<U1"),
                                         (object(), "object"),
                                         (torch.zeros(3, dtype=torch.int8), "int8"),
                                         (torch.zeros(3, dtype=torch.complex64), "complex64")])
def test_unsupported_element_types(array, name):
    raises(cumulus.UnsupportedTypeError, TypeError,
           f"CumSum: input 'x' has type {name}, which cumulus does not support (supported: "
           f"{SUPPORTED})", cumulus.cumsum, array)


def test_unconvertible_objects_keep_their_cause():
    e = raises(cumulus.UnsupportedTypeError, TypeError,
               "CumSum: input 'x' (Tensor) cannot be read through DLPack: Can't export tensors "
               "that require gradient, use tensor.detach()",
               cumulus.cumsum, torch.zeros(3, requires_grad=True))
    assert isinstance(e.__cause__, RuntimeError)
    e = pytest.raises(cumulus.UnsupportedTypeError, cumulus.cumsum, [1, [2, 3]]).value
    assert str(e).startswith("CumSum: input 'x' (list) is not an array: setting an array element")
    assert isinstance(e.__cause__, ValueError)


def test_sum_type_errors_are_type_errors():
    raises(cumulus.UnsupportedTypeError, TypeError,
           "Sum: type int64 is not supported (allowed: bfloat16, float16, float32, float64)",
           cumulus.sum, np.arange(3))
    raises(cumulus.UnsupportedTypeError, TypeError,
           "Sum: input 'data_1' has type float64 but input 'data_0' has type float32; all inputs "
           "must have one type", cumulus.sum, x, np.zeros(3))
    raises(cumulus.UnsupportedTypeError, TypeError,
           "Sum: input 'data_2' has type int8, which cumulus does not support (supported: "
           f"{SUPPORTED})", cumulus.sum, x, x, np.zeros(3, np.int8))


def test_sum_shape_errors():
    raises(cumulus.InvalidArgumentError, ValueError,
           "Sum: input 'data_1' of shape [2] cannot be broadcast with shape [2, 3] of the inputs "
           "before it (dimension 1 from the end: 2 vs 3)", cumulus.sum, x, np.zeros(2, np.float32))
    raises(cumulus.InvalidArgumentError, ValueError, "Sum: needs at least one input", cumulus.sum)
    # Dense arrays of one type and rank, as the common call has them.
    raises(cumulus.InvalidArgumentError, ValueError,
           "Sum: input 'data_1' of shape [3, 3] cannot be broadcast with shape [2, 3] of the inputs "
           "before it (dimension 2 from the end: 3 vs 2)", cumulus.sum, x, np.zeros((3, 3), np.float32))


def test_sum_takes_no_other_keyword():
    for kwargs in [{"output": x}, {"out": x, "axis": 0}]:
        with pytest.raises(TypeError, match=r"^sum\(\): incompatible function arguments"):
            cumulus.sum(x, x, **kwargs)


def test_out_errors():
    raises(cumulus.UnsupportedTypeError, TypeError,
           "CumSum: out has type float64 but the result has type float32; cumulus does not cast",
           cumulus.cumsum, x, 0, out=np.zeros((2, 3)))
    raises(cumulus.InvalidArgumentError, ValueError,
           "CumSum: out has shape [3, 2] but the result has shape [2, 3]",
           cumulus.cumsum, x, 0, out=np.zeros((3, 2), np.float32))
    raises(cumulus.InvalidArgumentError, ValueError,
           "CumSum: out has shape [2, 3] but the result has shape [6]",
           cumulus.cumsum, x, out=np.zeros((2, 3), np.float32))
    raises(cumulus.UnsupportedTypeError, TypeError,
           "CumSum: out must be a NumPy array or an object with __dlpack__ (such as a torch "
           "tensor), not list", cumulus.cumsum, x, 0, out=[0] * 6)
    read_only = np.zeros((2, 3), np.float32)
    read_only.flags.writeable = False
    raises(cumulus.InvalidArgumentError, ValueError, "CumSum: out is read-only",
           cumulus.cumsum, x, 0, out=read_only)
    raises(cumulus.InvalidArgumentError, ValueError, "Sum: out is read-only",
           cumulus.sum, x, out=np.broadcast_to(np.float32(0), (2, 3)))
    raises(cumulus.InvalidArgumentError, ValueError, "Sum: out is read-only",
           cumulus.sum, x, x, out=read_only)
    raises(cumulus.UnsupportedTypeError, TypeError,
           "Sum: out has type float64 but the result has type float32; cumulus does not cast",
           cumulus.sum, x, x, out=np.zeros((2, 3)))
    raises(cumulus.InvalidArgumentError, ValueError,
           "Sum: out has shape [6] but the result has shape [2, 3]",
           cumulus.sum, x, x, out=np.zeros(6, np.float32))
    raises(cumulus.InvalidArgumentError, ValueError,
           "Sum: out has shape [3] but the result has shape [2, 3]",
           cumulus.sum, x, out=np.zeros(3, np.float32))
    raises(cumulus.UnsupportedTypeError, TypeError,
           "Sum: out has type bfloat16 but the result has type float16; cumulus does not cast",
           cumulus.sum, torch.zeros(2, dtype=torch.float16),
           out=torch.zeros(2, dtype=torch.bfloat16))


def test_settings_errors():
    raises(cumulus.InvalidArgumentError, ValueError, "set_num_threads: n must be at least 1, not 0",
           cumulus.set_num_threads, 0)
    raises(cumulus.InvalidArgumentError, ValueError,
           "set_memory_limit: bytes must be 0 or more, not -1", cumulus.set_memory_limit, -1)
    raises(cumulus.UnsupportedTypeError, TypeError, "set_num_threads: n must be an integer, not str",
           cumulus.set_num_threads, "2")


def test_memory_limit():
    cumulus.set_memory_limit(1000)
    assert cumulus.memory_limit() == 1000
    raises(cumulus.LimitError, MemoryError,
           "a float64 tensor of shape [1000] needs 8000 bytes (7.8 KiB), more than the memory "
           "limit of 1000 bytes; the limit is set by CUMULUS_MEMORY_LIMIT or "
           "cumulus::set_memory_limit", cumulus.cumsum, np.zeros(1000))
    # The dense copy of a strided input counts too.
    with pytest.raises(MemoryError, match=r"shape \[500\] needs 4000 bytes"):
        cumulus.cumsum(np.zeros(1000)[::2], out=np.zeros(500))
    # Sum's result for NumPy inputs, allocated by NumPy, is held to the limit as well.
    raises(cumulus.LimitError, MemoryError,
           "a float64 tensor of shape [1000] needs 8000 bytes (7.8 KiB), more than the memory "
           "limit of 1000 bytes; the limit is set by CUMULUS_MEMORY_LIMIT or "
           "cumulus::set_memory_limit", cumulus.sum, np.zeros(1000), np.zeros(1000))
    cumulus.set_memory_limit(1 << 40)
    assert cumulus.cumsum(np.ones(1000))[-1] == 1000


def model_bytes(op_type="CumSum", opset=14, domain=""):
    node = helper.make_node(op_type, ["x", "axis"], ["y"], domain=domain)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("axis", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def test_model_errors(tmp_path):
    raises(cumulus.ParseError, ValueError,
           "model: not a valid ONNX model (the protobuf does not parse)",
           cumulus.onnx.load, b"\xff\xff\xff")
    missing = tmp_path / "missing.onnx"
    e = pytest.raises(cumulus.FileError, cumulus.onnx.load, missing).value
    assert isinstance(e, OSError) and str(e).startswith(f"cannot read '{missing}'")
    with pytest.raises(cumulus.UnsupportedError, match=r"unknown operator 'CumMax' in node #0"):
        cumulus.onnx.load(model_bytes("CumMax"))
    with pytest.raises(cumulus.InvalidArgumentError, match="CumProd does not exist at opset 14"):
        cumulus.onnx.load(model_bytes("CumProd", 14))
    raises(cumulus.UnsupportedTypeError, TypeError,
           "load: expected a path, bytes or an onnx.ModelProto, not int", cumulus.onnx.load, 3)


def test_run_errors():
    model = cumulus.onnx.load(model_bytes())
    feeds = {"x": np.zeros(3, np.float32), "axis": np.array(0)}
    model.run(feeds)
    with pytest.raises(cumulus.InvalidArgumentError, match="'nope'"):
        model.run({**feeds, "nope": np.zeros(1)})
    with pytest.raises(cumulus.InvalidArgumentError, match="'axis'"):
        model.run({"x": feeds["x"]})
    with pytest.raises(cumulus.InvalidArgumentError, match=re.escape("float64")):
        model.run({**feeds, "x": np.zeros(3)})
    with pytest.raises(cumulus.UnsupportedTypeError,
                       match="run: input 'x' has type int8, which cumulus does not support"):
        model.run({**feeds, "x": np.zeros(3, np.int8)})
    assert onnx.__version__
