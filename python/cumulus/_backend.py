"""cumulus.onnx.backend: an onnx.backend.base.Backend, so ONNX's own backend test runner
(onnx.backend.test) and other tools that speak it can run models through cumulus."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy
import onnx
from onnx import helper, mapping
from onnx.backend.base import Backend as _Backend
from onnx.backend.base import BackendRep as _BackendRep
from onnx.backend.base import Device, DeviceType, namedtupledict

from . import onnx as _onnx


class BackendRep(_BackendRep):
    """A prepared model: run(inputs) takes a list (in the order of the graph inputs that have no
    initializer) or a dict of arrays and returns the outputs as a named tuple."""

    def __init__(self, model: _onnx.Model) -> None:
        self.model = model
        self._names = [v.name for v in model.inputs if not v.has_default]

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[Any, ...]:
        if isinstance(inputs, dict):
            feeds = inputs
        else:
            if isinstance(inputs, numpy.ndarray) or hasattr(inputs, "__dlpack__"):
                inputs = [inputs]
            feeds = dict(zip(self._names, inputs))
        results = self.model.run(feeds)
        names = [v.name for v in self.model.outputs]
        return namedtupledict("Outputs", names)(*[results[n] for n in names])


class Backend(_Backend):
    """Runs ONNX models on the CPU through cumulus (CumSum, CumProd, Sum, Identity,
    Constant)."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> BackendRep:
        super().prepare(model, device, **kwargs)  # onnx.checker
        return BackendRep(_onnx.load(model))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> Tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Optional[Sequence[Tuple[numpy.dtype, Tuple[int, ...]]]] = None,
                 **kwargs: Any) -> Tuple[Any, ...]:
        """Runs one node on inputs (a list, in the node's input order), as a one-node model."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info, **kwargs)
        arrays = [numpy.asarray(x) for x in inputs]
        graph_inputs = [
            helper.make_tensor_value_info(name, mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape)
            for name, a in zip(node.input, arrays)
        ]
        if outputs_info is None:
            # The operators cumulus runs give the first input's type, at the largest rank.
            rank = max(a.ndim for a in arrays)
            outputs_info = [(arrays[0].dtype, [f"{name}_{i}" for i in range(rank)])
                            for name in node.output]
        graph_outputs = [
            helper.make_tensor_value_info(name, mapping.NP_TYPE_TO_TENSOR_TYPE[numpy.dtype(t)],
                                          shape)
            for name, (t, shape) in zip(node.output, outputs_info)
        ]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.prepare(model, device).run(dict(zip(node.input, arrays)))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU
