"""ONNX models through cumulus: load(path_or_bytes) -> Model, Model.run(feeds), and
``backend``, an onnx.backend.base.Backend (needs the onnx package; imported on first use).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Optional, Tuple, Union

import numpy

from . import _core

if TYPE_CHECKING:
    from ._backend import Backend

__all__ = ["Model", "ValueInfo", "backend", "load"]


class ValueInfo(NamedTuple):
    """A graph input or output as the model declares it."""

    name: str
    #: cumulus's name of the element type ("float32", "bfloat16"), ONNX's name of a type cumulus
    #: does not run ("int8"), or None when the model does not declare one.
    dtype: Optional[str]
    #: The dimensions, None for a symbolic one; None for any rank.
    shape: Optional[Tuple[Optional[int], ...]]
    #: An initializer gives the input a value when it is not fed.
    has_default: bool = False


class Model:
    """A loaded, checked and planned ONNX model (see load)."""

    def __init__(self, core: Any) -> None:
        self._core = core
        self.inputs = [ValueInfo(*v) for v in core.inputs]
        self.outputs = [ValueInfo(*v) for v in core.outputs]
        self._numpy_types = {v.name: _numpy_type(v.dtype) for v in self.inputs}

    @property
    def ir_version(self) -> int:
        return self._core.ir_version

    @property
    def opset(self) -> int:
        """The opset version the model imports for the default domain."""
        return self._core.opset

    def run(self, feeds: Mapping[str, Any]) -> dict:
        """Runs the model: feeds maps input names to NumPy arrays, torch CPU tensors, DLPack
        tensors or array-likes (converted to the declared type). Feeds are checked against the
        declared types and static dimensions; unknown names and missing inputs are errors.
        Returns {output name: array} in the graph's order: torch tensors when any feed is one,
        otherwise NumPy arrays. The GIL is released while the model runs."""
        converted = {}
        for name, value in feeds.items():
            if not isinstance(value, numpy.ndarray) and not hasattr(value, "__dlpack__"):
                value = numpy.asarray(value, dtype=self._numpy_types.get(name))
            converted[name] = value
        return self._core.run(converted)

    def __repr__(self) -> str:
        return f"cumulus.onnx.Model(inputs={self.inputs!r}, outputs={self.outputs!r})"


def _numpy_type(dtype: Optional[str]) -> Optional[numpy.dtype]:
    try:
        return numpy.dtype(dtype) if dtype is not None else None
    except TypeError:  # bfloat16 and the types NumPy lacks
        return None


def load(model: Union[str, os.PathLike, bytes, bytearray, memoryview, Any]) -> Model:
    """Loads an ONNX model from a path, from its serialized bytes, or from an onnx.ModelProto.

    Parses, checks and plans: unknown operators, cycles, undefined or duplicate names, operator
    versions and types are rejected here (cumulus.ParseError, cumulus.UnsupportedError,
    cumulus.InvalidArgumentError: all ValueErrors; cumulus.FileError, an OSError, for a file
    that cannot be read)."""
    if isinstance(model, (str, os.PathLike)):
        return Model(_core._load_model_file(os.fspath(model)))
    if hasattr(model, "SerializeToString"):
        return Model(_core._load_model_bytes(model.SerializeToString()))
    if isinstance(model, (bytes, bytearray, memoryview)):
        return Model(_core._load_model_bytes(bytes(model)))
    raise _core.UnsupportedTypeError(
        "load: expected a path, bytes or an onnx.ModelProto, not " + type(model).__name__)


def __getattr__(name: str) -> Any:
    if name == "backend":
        from ._backend import Backend

        return Backend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    backend = Backend
