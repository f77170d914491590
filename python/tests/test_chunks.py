"""Chunked scans (ScanState, scan_chunk, chunk_total): any cut of the axis gives the one-pass
result, in order and as a tree of totals; states round-trip through bytes and pickle, and bad
bytes are refused."""

import copy
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import cumulus
from helpers import make, random_values
from reference import DTYPES, INTS
from test_scan import check_scan

SCANS = {"cumsum": cumulus.cumsum, "cumprod": cumulus.cumprod}


def bits(result) -> np.ndarray:
    """The result's elements as unsigned integers of their width: equal bits, equal arrays."""
    if isinstance(result, torch.Tensor):
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[result.element_size()]
        return result.contiguous().view(width).numpy().view(f"u{result.element_size()}")
    a = np.ascontiguousarray(result)
    return a.view(f"u{a.itemsize}")


def take(x, lo, hi, axis):
    index = [slice(None)] * x.ndim
    index[axis] = slice(lo, hi)
    return x[tuple(index)]


def concat(parts, axis):
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts, dim=axis)
    return np.concatenate(parts, axis=axis)


def pieces(n, cuts):
    bounds = [0] + sorted(cuts) + [n]
    return list(zip(bounds[:-1], bounds[1:]))


def lines_of(x, axis):
    axis %= x.ndim
    return tuple(x.shape[:axis]) + tuple(x.shape[axis + 1:])


def scan_in_order(x, axis, cuts, op, exclusive, reverse):
    """Every chunk through one state, in scan order."""
    dtype = str(x.dtype).replace("torch.", "")
    state = cumulus.ScanState(op, dtype, lines_of(x, axis))
    spans = pieces(x.shape[axis], cuts)
    outs = {}
    for lo, hi in reversed(spans) if reverse else spans:
        outs[lo, hi] = cumulus.scan_chunk(take(x, lo, hi, axis), axis, state, op=op,
                                          exclusive=exclusive, reverse=reverse)
    return concat([outs[s] for s in spans], axis)


def scan_as_tree(x, axis, cuts, op, exclusive, reverse, grouping):
    """Each chunk from its own carry: the combine of the totals before it (in scan order),
    grouped as `grouping` picks (a right fold, or a left fold)."""
    spans = pieces(x.shape[axis], cuts)
    order = list(reversed(spans)) if reverse else spans
    totals = [cumulus.chunk_total(take(x, lo, hi, axis), axis, op=op) for lo, hi in order]
    dtype = str(x.dtype).replace("torch.", "")
    outs = {}
    for p, (lo, hi) in enumerate(order):
        if grouping == "left":
            carry = cumulus.ScanState(op, dtype, lines_of(x, axis))
            for t in totals[:p]:
                carry.combine(t)
        else:
            carry = cumulus.ScanState(op, dtype, lines_of(x, axis))
            for t in reversed(totals[:p]):
                later = carry
                carry = t.copy()
                carry.combine(later)
        outs[lo, hi] = cumulus.scan_chunk(take(x, lo, hi, axis), axis, carry, op=op,
                                          exclusive=exclusive, reverse=reverse)
    return concat([outs[s] for s in spans], axis)


@st.composite
def cases(draw, dtype, op):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    n = 1 + draw(st.integers(0, 9)) if draw(st.booleans()) else shape[axis]
    shape = shape[:axis % rank] + (n,) + shape[axis % rank + 1:]
    # Repeated cuts and cuts at the ends make chunks of length 0; neighbours, of length 1.
    cuts = draw(st.lists(st.integers(0, n), max_size=6))
    mode = "product" if op == "cumprod" else draw(st.sampled_from(["exact", "wide"]))
    values = random_values(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), dtype,
                           shape, mode)
    return values, axis, cuts, draw(st.booleans()), draw(st.booleans())


def check_chunked(dtype, op, case, kind="numpy"):
    values, axis, cuts, exclusive, reverse = case
    x = make(values, dtype, kind)
    one_pass = SCANS[op](x, axis, exclusive=exclusive, reverse=reverse)
    results = [scan_in_order(x, axis, cuts, op, exclusive, reverse),
               scan_as_tree(x, axis, cuts, op, exclusive, reverse, "left"),
               scan_as_tree(x, axis, cuts, op, exclusive, reverse, "right")]
    for got in results:
        assert type(got) is type(one_pass) and got.dtype == one_pass.dtype
        if op == "cumsum" or dtype in INTS:
            np.testing.assert_array_equal(bits(got), bits(one_pass))
        else:
            # A floating cumprod keeps the one-pass promise, checked against the exact product.
            check_scan(op, dtype, values, got, axis, exclusive, reverse, "product")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@given(data=st.data())
def test_any_cut_gives_the_one_pass_result(dtype, op, data):
    check_chunked(dtype, op, data.draw(cases(dtype, op)))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int64"])
@given(data=st.data())
def test_torch_chunks(dtype, data):
    check_chunked(dtype, "cumsum", data.draw(cases(dtype, "cumsum")), kind="torch")


def test_carries_keep_what_the_type_rounds_away():
    # 1 + 2^-30 is carried past the cut as it is: a carry rounded to float32 (1.0) would give
    # 0 after the -1 where the one-pass scan gives 2^-30.
    x = np.array([1.0, 2.0**-30, -1.0], dtype=np.float32)
    state = cumulus.ScanState("cumsum", "float32", ())
    parts = [cumulus.scan_chunk(x[:2], 0, state), cumulus.scan_chunk(x[2:], 0, state)]
    np.testing.assert_array_equal(np.concatenate(parts), cumulus.cumsum(x))
    assert np.concatenate(parts)[-1] == np.float32(2.0**-30)


@pytest.mark.parametrize("dtype", ["float64", "float32",
                                   "float16", "bfloat16"])
def test_long_scans_with_cancellation(dtype, rng):
    # Order-sensitive data (signs and a wide range of magnitudes) on long lines, cut unevenly.
    n = 1000 if dtype in ("float64", "float32") else 200
    v = rng.uniform(-1, 1, (n, 3)) * np.exp(rng.uniform(-20, 20, (n, 3)))
    x = make(np.clip(v, -6e4, 6e4) if dtype == "float16" else v, dtype,
             "torch" if dtype == "bfloat16" else "numpy")
    cuts = sorted(rng.integers(0, n + 1, 12).tolist()) + [5, 5, 6]
    for reverse in (False, True):
        one_pass = cumulus.cumsum(x, 0, reverse=reverse)
        for got in [scan_in_order(x, 0, cuts, "cumsum", False, reverse),
                    scan_as_tree(x, 0, cuts, "cumsum", False, reverse, "left")]:
            np.testing.assert_array_equal(bits(got), bits(one_pass))


def test_state_describes_itself():
    s = cumulus.ScanState("cumprod", np.float64, [2, 3])
    assert (s.op, s.dtype, s.lines_shape) == ("cumprod", "float64", (2, 3))
    assert cumulus.ScanState("cumsum", torch.bfloat16, ()).dtype == "bfloat16"
    assert cumulus.ScanState("cumsum", np.dtype(">i4"), (0,)).dtype == "int32"
    t = cumulus.chunk_total(np.ones((4, 5, 6), np.uint32), 1)
    assert (t.op, t.dtype, t.lines_shape) == ("cumsum", "uint32", (4, 6))
    assert repr(t) == 'cumulus.ScanState("cumsum", "uint32", (4, 6))'


def test_scan_chunk_updates_the_state_and_writes_out():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    state = cumulus.ScanState("cumsum", "float64", (2,))
    out = np.empty_like(x)
    assert cumulus.scan_chunk(x, 1, state, out=out) is out
    np.testing.assert_array_equal(out, np.cumsum(x, 1))
    # The state now holds the row totals: the next chunk starts from them.
    np.testing.assert_array_equal(cumulus.scan_chunk(np.ones((2, 1)), -1, state),
                                  [[7.0], [16.0]])
    # In place, through a strided view.
    y = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    expected = np.cumsum(y, 0)
    cumulus.scan_chunk(y, 0, cumulus.ScanState("cumsum", "int64", (2,)), out=y)
    np.testing.assert_array_equal(y, expected)


def advanced(state, x):
    """The output of scanning x along axis 0 from a copy of state."""
    return cumulus.scan_chunk(x, 0, state.copy())


def first_and_next(rng, dtype, op):
    mode = "product" if op == "cumprod" else "wide"
    return (make(random_values(rng, dtype, (7, 3), mode), dtype),
            make(random_values(rng, dtype, (5, 3), mode), dtype))


def round_trip_cases():
    for op in ["cumsum", "cumprod"]:
        for dtype in DTYPES:
            yield pytest.param(op, dtype)


@pytest.mark.parametrize("op, dtype", round_trip_cases())
def test_state_round_trips_through_bytes_and_pickle(op, dtype, rng):
    first, nxt = first_and_next(rng, dtype, op)
    state = cumulus.chunk_total(first, 0, op=op)
    data = state.to_bytes()
    assert isinstance(data, bytes)
    for back in [cumulus.ScanState.from_bytes(data), cumulus.ScanState.from_bytes(bytearray(data)),
                 cumulus.ScanState.from_bytes(memoryview(data)), pickle.loads(pickle.dumps(state))]:
        assert (back.op, back.dtype, back.lines_shape) == (op, dtype, (3,))
        assert back.to_bytes() == data
        np.testing.assert_array_equal(bits(advanced(back, nxt)), bits(advanced(state, nxt)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_state_copies(op, dtype, rng):
    first, nxt = first_and_next(rng, dtype, op)
    state = cumulus.chunk_total(first, 0, op=op)
    for back in [copy.copy(state), copy.deepcopy(state), state.copy()]:
        assert (back.op, back.dtype, back.lines_shape) == (op, dtype, (3,))
        np.testing.assert_array_equal(bits(advanced(back, nxt)), bits(advanced(state, nxt)))
        # What follows first, from the copy, is what the one-pass scan gives there.
        whole = SCANS[op](concat([first, nxt], 0), 0)
        np.testing.assert_array_equal(bits(advanced(back, nxt)), bits(whole[7:]))


def test_copies_are_independent():
    state = cumulus.chunk_total(np.arange(4.0), 0)
    other = state.copy()
    other.combine(cumulus.chunk_total(np.ones(3), 0))
    assert cumulus.scan_chunk(np.zeros(1), 0, state)[0] == 6.0
    assert cumulus.scan_chunk(np.zeros(1), 0, other)[0] == 9.0


def test_combine_with_itself():
    state = cumulus.chunk_total(np.array([1, 2, 3], np.int32), 0)
    state.combine(state)
    assert cumulus.scan_chunk(np.zeros(1, np.int32), 0, state)[0] == 12


def some_bytes():
    state = cumulus.chunk_total(np.array([[1.5, -2.0], [1e300, 3.0]]), 0)
    return state.to_bytes()


def test_truncated_bytes_are_refused():
    data = some_bytes()
    for n in range(len(data)):
        with pytest.raises(cumulus.InvalidArgumentError, match="ScanState"):
            cumulus.ScanState.from_bytes(data[:n])
    with pytest.raises(cumulus.InvalidArgumentError, match="ScanState"):
        cumulus.ScanState.from_bytes(data + b"\0")


def test_foreign_bytes_are_refused():
    data = some_bytes()
    for garbage in [b"", b"\0" * len(data), b"\xff" * len(data), pickle.dumps(np.arange(9.0))]:
        with pytest.raises(cumulus.InvalidArgumentError, match="ScanState"):
            cumulus.ScanState.from_bytes(garbage)
    with pytest.raises(cumulus.UnsupportedTypeError, match="bytes"):
        cumulus.ScanState.from_bytes("not bytes")


def test_altered_bytes_are_refused():
    data = some_bytes()
    for i in range(len(data)):
        for flip in (0x01, 0x80):
            altered = bytearray(data)
            altered[i] ^= flip
            with pytest.raises(cumulus.InvalidArgumentError, match="ScanState") as e:
                cumulus.ScanState.from_bytes(bytes(altered))
            assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad, error, match", [
    (lambda: cumulus.ScanState("cumsumm", "float32", ()), cumulus.InvalidArgumentError, "op"),
    (lambda: cumulus.ScanState(1, "float32", ()), cumulus.UnsupportedTypeError, "op"),
    (lambda: cumulus.ScanState("cumsum", "complex64", ()), cumulus.UnsupportedTypeError, "dtype"),
    (lambda: cumulus.ScanState("cumsum", "float32", (2, -1)), cumulus.InvalidArgumentError,
     "ScanState: lines_shape has a negative dimension -1"),
    (lambda: cumulus.ScanState("cumsum", "float32", 3), cumulus.UnsupportedTypeError,
     "lines_shape"),
    (lambda: cumulus.scan_chunk(np.ones(3), 0, "state"), cumulus.UnsupportedTypeError, "state"),
    (lambda: cumulus.scan_chunk(np.ones(3), 1, cumulus.ScanState("cumsum", "float64", ())),
     cumulus.InvalidArgumentError, "axis"),
    (lambda: cumulus.chunk_total(np.ones(3), 0, op="sum"), cumulus.InvalidArgumentError, "op"),
    (lambda: cumulus.chunk_total(np.ones(3, np.complex64), 0), cumulus.UnsupportedTypeError,
     "complex64"),
])
def test_bad_arguments(bad, error, match):
    with pytest.raises(error, match=match):
        bad()


@pytest.mark.parametrize("state, why", [
    (cumulus.ScanState("cumsum", "float32", (3,)), "dtype"),
    (cumulus.ScanState("cumsum", "float64", (4,)), "lines shape"),
    (cumulus.ScanState("cumprod", "float64", (3,)), "op"),
])
def test_a_state_of_another_scan_is_refused_and_left_alone(state, why):
    x = np.ones((2, 3))
    before = state.to_bytes()
    with pytest.raises(cumulus.InvalidArgumentError):
        cumulus.scan_chunk(x, 0, state, op="cumsum")
    assert state.to_bytes() == before
    with pytest.raises(cumulus.InvalidArgumentError):
        state.combine(cumulus.chunk_total(x, 0))
    assert state.to_bytes() == before
