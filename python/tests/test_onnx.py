"""cumulus.onnx: load from a path, bytes or a ModelProto; inputs and outputs; run with NumPy
and torch feeds; the shared conformance cases through the same calls."""

import glob
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import cumulus
import cumulus.onnx

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
NODE_TESTS = Path(os.environ.get("CUMULUS_NODE_TESTS", REPO.parent / "shared" / "onnx-node-tests"))


def scan_model(op="CumSum", elem=TensorProto.FLOAT, opset=14, **attributes):
    """A one-node scan model: x of any length, axis a 0-D int64; y."""
    node = helper.make_node(op, ["x", "axis"], ["y"], **attributes)
    graph = helper.make_graph(
        [node], "scan",
        [helper.make_tensor_value_info("x", elem, ["n"]),
         helper.make_tensor_value_info("axis", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", elem, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def test_load_from_path_bytes_and_model_proto():
    path = EXAMPLES / "cumsum.onnx"
    for source in (path, str(path), path.read_bytes(), bytearray(path.read_bytes()),
                   memoryview(path.read_bytes()), onnx.load(str(path))):
        model = cumulus.onnx.load(source)
        assert [v.name for v in model.inputs] == ["x"]
        x = np.load(EXAMPLES / "cumsum_x.npy")
        out = model.run({"x": x})
        assert list(out) == [v.name for v in model.outputs]
        np.testing.assert_array_equal(out[model.outputs[0].name], np.cumsum(x))


def test_value_info():
    model = cumulus.onnx.load(scan_model())
    assert model.inputs == [cumulus.onnx.ValueInfo("x", "float32", (None,), False),
                            cumulus.onnx.ValueInfo("axis", "int64", (), False)]
    assert model.outputs[0].name == "y" and model.outputs[0].dtype == "float32"
    assert model.opset == 14 and model.ir_version >= 3
    assert "ValueInfo(name='x'" in repr(model)


def test_declared_types_cumulus_does_not_run_are_named():
    node = helper.make_node("Identity", ["a"], ["b"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.INT8, [2])],
                              [helper.make_tensor_value_info("b", TensorProto.INT8, [2])])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()
    try:
        model = cumulus.onnx.load(data)
    except cumulus.Error as e:  # refusing it at load is as good
        assert "int8" in str(e)
        return
    assert model.inputs[0].dtype == "int8"


def test_run_with_torch_feeds_returns_torch():
    model = cumulus.onnx.load(scan_model(elem=TensorProto.BFLOAT16, exclusive=1))
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    y = model.run({"x": x, "axis": torch.tensor(0)})["y"]
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16
    assert y.tolist() == [0.0, 1.0, 3.0]


def test_run_converts_array_likes_to_the_declared_type():
    model = cumulus.onnx.load(scan_model(reverse=1))
    y = model.run({"x": [1, 2, 3], "axis": 0})["y"]
    assert y.dtype == np.float32 and y.tolist() == [6.0, 5.0, 3.0]
    strided = np.arange(10, dtype=np.float32)[::3]
    np.testing.assert_array_equal(model.run({"x": strided, "axis": 0})["y"],
                                  np.cumsum(strided[::-1])[::-1])


class Foreign:
    """A DLPack producer that is not torch: its results come back as NumPy arrays."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return torch.utils.dlpack.to_dlpack(self.t)


def test_bfloat16_output_for_numpy_results_needs_ml_dtypes():
    model = cumulus.onnx.load(scan_model(elem=TensorProto.BFLOAT16))
    feeds = {"x": Foreign(torch.tensor([1.0, 2.0], dtype=torch.bfloat16)), "axis": np.array(0)}
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(cumulus.UnsupportedTypeError, match="NumPy has no bfloat16"):
            model.run(feeds)
    else:
        assert model.run(feeds)["y"].astype(np.float32).tolist() == [1.0, 3.0]


def node_cases():
    return sorted(glob.glob(str(NODE_TESTS / "test_*")))


@pytest.mark.skipif(not NODE_TESTS.is_dir(), reason="no shared ONNX node tests")
def test_shared_conformance_cases():
    """The node tests in ../shared/onnx-node-tests (CumProd included) through cumulus.onnx,
    with the ONNX runner's tolerance (integers exact)."""
    cases = node_cases()
    assert len(cases) >= 20
    for case in cases:
        model_proto = onnx.load(os.path.join(case, "model.onnx"))
        model = cumulus.onnx.load(os.path.join(case, "model.onnx"))
        for data_set in sorted(glob.glob(os.path.join(case, "test_data_set_*"))):
            inputs = [numpy_helper.to_array(onnx.load_tensor(p))
                      for p in sorted(glob.glob(os.path.join(data_set, "input_*.pb")))]
            expected = [numpy_helper.to_array(onnx.load_tensor(p))
                        for p in sorted(glob.glob(os.path.join(data_set, "output_*.pb")))]
            names = [i.name for i in model_proto.graph.input]
            out = model.run(dict(zip(names, inputs)))
            got = [out[o.name] for o in model_proto.graph.output]
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.dtype == e.dtype, case
                if e.dtype.kind in "iu":
                    np.testing.assert_array_equal(g, e, err_msg=case)
                else:
                    np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-7, err_msg=case)
