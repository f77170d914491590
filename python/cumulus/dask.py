"""cumulus over Dask arrays: scans along a chunked axis and Sum, as lazy dask.array graphs.

    >>> import dask.array as da, cumulus.dask
    >>> a = da.arange(10.0, chunks=3)
    >>> cumulus.dask.cumsum(a, axis=0).compute()
    array([ 0.,  1.,  3.,  6., 10., 15., 21., 28., 36., 45.])

A scan's graph has three parts, for every block of the other axes: each chunk's total along the
axis (cumulus.chunk_total, one task per chunk); the carries, formed from the totals by a tree of
cumulus.ScanState.combine tasks of depth about 2 log2(chunks) (an up-sweep of totals, then a
down-sweep of carries); and each chunk scanned from its carry (cumulus.scan_chunk). The states
are exact, so the result is, bit for bit, cumulus.cumsum of the whole array for any chunking
(cumprod: integers bit for bit, floats within cumprod's 1-ulp promise). States travel between
processes pickled (ScanState.to_bytes).
"""

from __future__ import annotations

import operator
from typing import Any, Optional

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from . import _core

__all__ = ["cumprod", "cumsum", "sum"]


def cumsum(a: Any, axis: int, exclusive: bool = False, reverse: bool = False) -> da.Array:
    """ONNX CumSum of a dask array along `axis`: a lazy dask array with a's chunks, equal bit for
    bit to cumulus.cumsum(a.compute(), axis, exclusive=..., reverse=...)."""
    return _scan("cumsum", a, axis, exclusive, reverse)


def cumprod(a: Any, axis: int, exclusive: bool = False, reverse: bool = False) -> da.Array:
    """ONNX CumProd of a dask array along `axis`: a lazy dask array with a's chunks, equal to
    cumulus.cumprod(a.compute(), axis, ...) (integers bit for bit, floats within 1 ulp of the
    exact product, as cumprod itself)."""
    return _scan("cumprod", a, axis, exclusive, reverse)


def sum(*arrays: Any) -> da.Array:  # noqa: A001 (ONNX's name, as cumulus.sum)
    """ONNX Sum (elementwise, NumPy broadcasting, one floating element type) of dask arrays (or
    arrays and scalars), block by block through cumulus.sum: a lazy dask array."""
    if not arrays:
        _core.sum()  # cumulus's own error for no inputs
    arrays = tuple(da.asarray(x) for x in arrays)
    # Types first, on scalar stand-ins, for cumulus's own error now rather than at compute.
    _core.sum(*(np.zeros((), x.dtype) for x in arrays))
    _check_broadcast(arrays)
    ndim = max(x.ndim for x in arrays)
    out_ind = tuple(range(ndim))
    args = []
    for x in arrays:
        args += [x, out_ind[ndim - x.ndim:]]
    return da.blockwise(_sum, out_ind, *args, dtype=arrays[0].dtype,
                        meta=np.empty((0,) * ndim, arrays[0].dtype))


def _check_broadcast(arrays) -> None:
    ndim = max(x.ndim for x in arrays)
    for i in range(1, ndim + 1):
        sizes = {x.shape[-i] for x in arrays if x.ndim >= i and x.shape[-i] != 1}
        if len(sizes) > 1:
            shapes = ", ".join(f"'data_{k}' {tuple(x.shape)}" for k, x in enumerate(arrays))
            raise _core.InvalidArgumentError(f"Sum: input shapes do not broadcast: {shapes}")


def _scan(op: str, a: Any, axis: int, exclusive: bool, reverse: bool) -> da.Array:
    a = da.asarray(a)
    # cumulus's own checks of the dtype, axis and attributes, now, on an empty stand-in.
    stand_in = np.empty((0,) * a.ndim, a.dtype)
    _core.scan_chunk(stand_in, axis, _core.chunk_total(stand_in, axis, op=op),
                     exclusive=exclusive, reverse=reverse)
    axis = operator.index(axis) % a.ndim
    exclusive, reverse = bool(exclusive), bool(reverse)
    token = tokenize(a, op, axis, exclusive, reverse)
    name = f"cumulus-{op}-{token}"
    total = f"cumulus-{op}-total-{token}"
    carry = f"cumulus-{op}-carry-{token}"
    dsk: dict = {}
    count = a.numblocks[axis]
    others = a.numblocks[:axis] + a.numblocks[axis + 1:]
    for index in np.ndindex(*others) if count > 0 else ():
        # Positions in scan order: position p is block p, or block count-1-p for a reverse scan.
        def block(p: int) -> tuple:
            return (*index[:axis], count - 1 - p if reverse else p, *index[axis:])

        # The state of positions lo..hi-1, under a key of its own.
        def state_key(prefix: str, lo: int, hi: int) -> tuple:
            return (prefix, *index[:axis], lo, hi, *index[axis:])

        for p in range(count):
            dsk[state_key(total, p, p + 1)] = (_total, (a.name, *block(p)), axis, op)

        # The up-sweep: totals of ranges, for the left halves the down-sweep needs.
        def range_total(lo: int, hi: int) -> tuple:
            k = state_key(total, lo, hi)
            if k not in dsk:
                mid = (lo + hi) // 2
                dsk[k] = (_combined, range_total(lo, mid), range_total(mid, hi))
            return k

        # The down-sweep: `before` is the key of the state of positions 0..lo-1 (None: nothing).
        def sweep(lo: int, hi: int, before: Optional[tuple]) -> None:
            if hi - lo == 1:
                dsk[(name, *block(lo))] = (_scan_block, (a.name, *block(lo)), axis, before, op,
                                           exclusive, reverse)
                return
            mid = (lo + hi) // 2
            sweep(lo, mid, before)
            through_left = range_total(lo, mid)
            if before is not None:
                dsk[state_key(carry, 0, mid)] = (_combined, before, through_left)
                through_left = state_key(carry, 0, mid)
            sweep(mid, hi, through_left)

        sweep(0, count, None)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[a])
    return da.Array(graph, name, chunks=a.chunks, dtype=a.dtype,
                    meta=np.empty((0,) * a.ndim, a.dtype))


def _sum(*blocks):
    # A Python function: the extension's own do not pickle for worker processes.
    return _core.sum(*blocks)


def _total(x, axis: int, op: str):
    return _core.chunk_total(x, axis, op=op)


def _combined(first, later):
    """A new state: `first` then `later` (task inputs are shared, never changed)."""
    state = first.copy()
    state.combine(later)
    return state


def _scan_block(x, axis: int, before, op: str, exclusive: bool, reverse: bool):
    if before is None:
        lines = x.shape[:axis] + x.shape[axis + 1:]
        before = _core.ScanState(op, x.dtype, lines)
    else:
        before = before.copy()
    return _core.scan_chunk(x, axis, before, op=op, exclusive=exclusive, reverse=reverse)
