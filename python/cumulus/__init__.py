"""cumulus: the ONNX accumulation operators (CumSum, CumProd, Sum) on NumPy arrays, PyTorch
tensors and any DLPack tensor, without copies, with the GIL released while the kernels run.

    >>> import numpy, cumulus
    >>> cumulus.cumsum(numpy.arange(5))
    array([ 0,  1,  3,  6, 10])

Functions: cumsum, cumprod, sum; chunked scans (data past memory, streams): ScanState,
scan_chunk, chunk_total; set_num_threads, num_threads, kernel_isa, set_memory_limit,
memory_limit. Errors are cumulus.Error, each also a ValueError, TypeError, MemoryError or
OSError. ONNX models: cumulus.onnx. Dask arrays: cumulus.dask (imported when first used, so that
cumulus needs no Dask).
"""

from ._core import (
    Error,
    FileError,
    InvalidArgumentError,
    LimitError,
    ParseError,
    ScanState,
    UnsupportedError,
    UnsupportedTypeError,
    __version__,
    chunk_total,
    cumprod,
    cumsum,
    kernel_isa,
    memory_limit,
    num_threads,
    scan_chunk,
    set_memory_limit,
    set_num_threads,
    sum,
)
from . import onnx

__all__ = [
    "Error",
    "FileError",
    "InvalidArgumentError",
    "LimitError",
    "ParseError",
    "ScanState",
    "UnsupportedError",
    "UnsupportedTypeError",
    "__version__",
    "chunk_total",
    "cumprod",
    "cumsum",
    "kernel_isa",
    "memory_limit",
    "num_threads",
    "onnx",
    "scan_chunk",
    "set_memory_limit",
    "set_num_threads",
    "sum",
]


def __getattr__(name: str):
    # cumulus.dask imports dask.array: only when asked for.
    if name == "dask":
        import importlib

        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'cumulus' has no attribute {name!r}")
