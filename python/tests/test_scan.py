"""cumsum and cumprod against the exact reference, NumPy and PyTorch: every element type,
layout, axis and attribute."""

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import cumulus
from helpers import make, random_values
from reference import (DTYPES, FLOATS, INTS, NUMPY_DTYPES, as_values, assert_equal_values,
                       exact, scan_reference, sum_reference, ulp)

OPS = {"cumsum": cumulus.cumsum, "cumprod": cumulus.cumprod}
U = Fraction(1, 1 << 53)  # the unit roundoff of double


def check_scan(op, dtype, values, got, axis, exclusive, reverse, mode):
    """got against the exact prefixes of values, to the promise for dtype and op."""
    exact_out, rounded = scan_reference(values, dtype, op, axis, exclusive, reverse)
    got = as_values(got)
    assert got.shape == rounded.shape
    if dtype in INTS or (op == "cumsum" and mode == "exact"):
        assert_equal_values(got, rounded)  # exact in double: rounded once
        return
    magnitude, _ = scan_reference(np.abs(values), dtype, op, axis, exclusive, reverse)
    n = values.shape[axis] if axis is not None and values.ndim else max(values.size, 1)
    for index in np.ndindex(got.shape):
        g, e, r = float(got[index]), exact_out[index], float(rounded[index])
        if g == r:
            continue
        # The double accumulator's own error bound, for any order of n operations.
        acc = n * U / (1 - n * U) * (Fraction(magnitude[index]) if op == "cumsum"
                                      else abs(Fraction(e)))
        assert np.isfinite(g) and np.isfinite(r), (index, g, r)
        err = abs(Fraction(g) - Fraction(e))
        if dtype == "float64":
            assert err <= acc, (index, g, float(e))
        else:
            # Rounded once from a double within acc of the exact value: within one ulp when
            # acc is under half an ulp, which random data almost always gives.
            half = ulp(r, dtype) / 2
            assert err <= max(ulp(r, dtype), ulp(g, dtype)) + (acc if acc > half else 0), \
                (index, g, float(e), r, float(acc))


def kind_for(dtype):
    return "torch" if dtype == "bfloat16" else "numpy"


shapes = st.lists(st.integers(0, 7), min_size=1, max_size=4).map(tuple)


@given(op=st.sampled_from(list(OPS)), dtype=st.sampled_from(DTYPES), shape=shapes,
       data=st.data(), exclusive=st.booleans(), reverse=st.booleans(),
       mode=st.sampled_from(["exact", "wide"]), seed=st.integers(0, 2**32 - 1))
def test_scan_matches_exact_reference(op, dtype, shape, data, exclusive, reverse, mode, seed):
    rank = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-rank, rank - 1)), label="axis")
    rng = np.random.default_rng(seed)
    if op == "cumprod":
        mode = "product"
    values = random_values(rng, dtype, shape, mode)
    x = make(values, dtype, kind_for(dtype))
    got = OPS[op](x, axis, exclusive=exclusive, reverse=reverse)
    assert type(got) is type(x)
    assert str(got.dtype).replace("torch.", "") == dtype
    check_scan(op, dtype, values, got, axis, exclusive, reverse, mode)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("op", list(OPS))
def test_layouts(rng, op, dtype):
    """Sliced, transposed, Fortran, negative strides, misaligned, non-native byte order,
    broadcast (stride 0), 0-d and empty inputs all give the exactly expected result."""
    mode = "product" if op == "cumprod" else "exact"
    base_values = random_values(rng, dtype, (6, 10), mode)
    base = make(base_values, dtype)
    misaligned = np.frombuffer(b"\0" + base.tobytes(), dtype=dtype, offset=1).reshape(6, 10)
    assert not misaligned.flags.aligned
    layouts = {
        "sliced": base[1:5, ::3],
        "transposed": base.T,
        "fortran": np.asfortranarray(base),
        "negative": base[::-1, ::-2],
        "misaligned": misaligned,
        "swapped": base.astype(np.dtype(dtype).newbyteorder()),
        "broadcast": np.broadcast_to(base[0], (3, 10)),
        "zero_d": base[2, 3],  # a NumPy scalar: numpy.asarray makes it 0-d
        "zero_d_array": np.array(base[2, 3]),
        "empty": base[:0],
        "empty_columns": base[:, :0],
    }
    for name, x in layouts.items():
        values = np.asarray(x).astype(object if dtype in INTS else np.float64)
        if dtype in INTS:
            values = np.array(np.asarray(x).tolist(), dtype=object).reshape(np.shape(x))
        axes = [None] + list(range(-np.ndim(x), np.ndim(x)))
        for axis in axes:
            for exclusive in (False, True):
                for reverse in (False, True):
                    got = OPS[op](x, axis, exclusive=exclusive, reverse=reverse)
                    assert isinstance(got, np.ndarray), name
                    assert got.dtype == np.dtype(dtype), (name, got.dtype)
                    assert got.dtype.isnative
                    check_scan(op, dtype, values, got, axis, exclusive, reverse, mode)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint64", "float16"])
def test_axis_none_flattens_in_c_order(rng, dtype):
    values = random_values(rng, dtype, (3, 4, 5), "exact")
    x = make(values, dtype).transpose(2, 0, 1)
    got = cumulus.cumsum(x)
    assert got.shape == (60,)
    np.testing.assert_array_equal(got, cumulus.cumsum(np.ascontiguousarray(x).reshape(-1), 0))


def numpy_scan(x, axis, exclusive, reverse, op):
    """The scan by NumPy in x's own type (integers wrap), for data where NumPy is exact."""
    f = np.cumsum if op == "cumsum" else np.cumprod
    y = np.flip(x, axis) if reverse else x
    y = f(y, axis=axis, dtype=x.dtype)
    if exclusive:
        identity = np.zeros_like(y) if op == "cumsum" else np.ones_like(y)
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, -1)
        shifted = identity.copy()
        target = [slice(None)] * x.ndim
        target[axis] = slice(1, None)
        shifted[tuple(target)] = y[tuple(index)]
        y = shifted
    return np.flip(y, axis) if reverse else y


@pytest.mark.parametrize("dtype", INTS + ["float64"])
@pytest.mark.parametrize("op", list(OPS))
def test_against_numpy(rng, op, dtype):
    """NumPy agrees with cumulus on integers (both wrap) and on float64 integers."""
    for shape in [(1000,), (17, 33), (4, 5, 6)]:
        if dtype == "float64":
            x = rng.integers(-50, 50, shape).astype(np.float64)
            if op == "cumprod":
                x = rng.choice([-2.0, -1.0, 1.0, 2.0], shape)
        else:
            x = make(random_values(rng, dtype, shape, "wide"), dtype)
        for axis in range(x.ndim):
            for exclusive in (False, True):
                for reverse in (False, True):
                    np.testing.assert_array_equal(
                        OPS[op](x, axis, exclusive=exclusive, reverse=reverse),
                        numpy_scan(x, axis, exclusive, reverse, op))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bfloat16"])
def test_against_torch(rng, dtype):
    """torch.cumsum accumulates float32 and bfloat16 in wider types too: on data whose sums are
    exact there, both give the exactly rounded result."""
    if dtype == "bfloat16":  # torch adds bfloat16 in float32: exact for small integers
        values = rng.integers(-8, 9, (64, 48)).astype(np.float64)
    else:
        values = random_values(rng, dtype, (64, 48), "exact" if dtype in FLOATS else "wide")
    t = make(values, dtype, "torch")
    for axis in (0, 1, -1):
        got = cumulus.cumsum(t, axis)
        assert isinstance(got, torch.Tensor) and got.dtype == t.dtype
        assert torch.equal(got, torch.cumsum(t, axis, dtype=t.dtype))  # integers wrap
    p = make(random_values(rng, dtype, (16, 24), "product"), dtype, "torch")
    if dtype != "bfloat16":  # torch 1.13 has no bfloat16 cumprod on the CPU
        assert torch.allclose(cumulus.cumprod(p, 1).double(), torch.cumprod(p, 1).double(),
                              rtol=2.0 ** -20, atol=0)


def test_long_rows_are_exact(rng):
    """Rows long enough to be split between threads: float32 sums of small integers stay
    exact, so every element must equal the float64 NumPy scan."""
    x = rng.integers(-8, 9, 300_001).astype(np.float32)
    for threads in (1, 2):
        cumulus.set_num_threads(threads)
        for reverse in (False, True):
            expected = np.cumsum(x[::-1] if reverse else x, dtype=np.float64)
            got = cumulus.cumsum(x, reverse=reverse)
            np.testing.assert_array_equal(got, (expected[::-1] if reverse else expected)
                                          .astype(np.float32))


def test_float16_sums_exactly_rounded(rng):
    """Any float16 values, 8192 to a row: the double sum is exact, so the output is the exact
    sum rounded once (NumPy, adding in float16, is not)."""
    bits = rng.integers(0, 1 << 16, 8192).astype(np.uint16)
    bits[(bits & 0x7C00) == 0x7C00] = 0  # no NaN or infinity
    x = bits.view(np.float16)
    got = cumulus.cumsum(x)
    _, rounded = scan_reference(x.astype(np.float64), "float16", "cumsum", 0)
    assert_equal_values(got.astype(np.float64), rounded)


def test_double_rounding_avoided():
    """The cases DESIGN.md names: double -> float -> half rounding would be wrong."""
    assert cumulus.cumsum(np.array([1, 2.0**-11, 2.0**-24], np.float16))[-1].view(np.uint16) \
        == 0x3C01
    b = cumulus.cumsum(torch.tensor([1, 2.0**-8, 2.0**-24], dtype=torch.bfloat16))
    assert b[-1].view(torch.int16).item() == 0x3F81


def test_float_specials_follow_ieee():
    x = np.array([1.0, np.inf, -np.inf, 2.0, np.nan, 3.0])
    np.testing.assert_array_equal(cumulus.cumsum(x), np.cumsum(x))
    np.testing.assert_array_equal(cumulus.cumprod(x), np.cumprod(x))
    f32 = np.array([3e38, 3e38, -3e38], np.float32)
    # In double the middle prefix overflows float32 but the last comes back: rounded once each.
    np.testing.assert_array_equal(cumulus.cumsum(f32), np.array([3e38, np.inf, 3e38], np.float32))


def test_integers_wrap():
    x = np.array([2**31 - 1, 1, 1], np.int32)
    np.testing.assert_array_equal(cumulus.cumsum(x), [2**31 - 1, -2**31, -2**31 + 1])
    u = np.array([2**64 - 1, 2], np.uint64)
    np.testing.assert_array_equal(cumulus.cumsum(u), np.array([2**64 - 1, 1], np.uint64))
    assert cumulus.cumprod(np.array([2**32, 2**32], np.int64))[-1] == 0
    assert exact(np.uint64(2**64 - 1)) == 2**64 - 1


def test_array_likes_follow_numpy():
    got = cumulus.cumsum([1, 2, 3])
    assert got.dtype == np.int64 and got.tolist() == [1, 3, 6]
    got = cumulus.cumprod([[1.5, 2.0], [3.0, 4.0]], 1)
    assert got.dtype == np.float64 and got.tolist() == [[1.5, 3.0], [3.0, 12.0]]
    got = cumulus.cumsum(7)
    assert got.shape == (1,) and got[0] == 7
    got = cumulus.cumsum((np.float32(1), np.float32(2)))
    assert got.dtype == np.float32


def test_attributes_accept_python_and_numpy_flags():
    x = np.arange(1, 5, dtype=np.int64)
    for flag in (True, 1, np.bool_(True), np.int64(1)):
        assert cumulus.cumsum(x, exclusive=flag).tolist() == [0, 1, 3, 6]
        assert cumulus.cumsum(x, reverse=flag).tolist() == [10, 9, 7, 4]
    assert cumulus.cumsum(x, np.int64(-1), exclusive=0).tolist() == [1, 3, 6, 10]


def test_results_own_their_memory():
    x = np.arange(10.0)
    y = cumulus.cumsum(x)
    assert not np.shares_memory(x, y)
    assert y.flags.writeable and y.flags.c_contiguous and y.flags.aligned
    del x
    y[0] = 5
    assert y[0] == 5


def test_callers_flushing_subnormals_changes_nothing(rng):
    """torch.set_flush_denormal(True) makes the calling thread flush subnormals (FTZ and DAZ):
    cumulus still gives the exact sums rounded once, and the caller keeps its setting."""
    x = (rng.uniform(0.5, 1.0, 64) * 2.0**-140).astype(np.float32)  # float32 subnormals
    x[::3] *= -1
    _, rounded = scan_reference(x.astype(np.float64), "float32", "cumsum", 0)
    _, doubled = sum_reference([x.astype(np.float64), x.astype(np.float64)], "float32")
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals")
    try:
        tiny = torch.tensor([1e-40], dtype=torch.float32)
        assert (tiny * 1.0).item() == 0  # flushing, as the caller asked
        got, total = cumulus.cumsum(x), cumulus.sum(x, x)
        assert (tiny * 1.0).item() == 0  # and still after the calls
    finally:
        torch.set_flush_denormal(False)
    assert_equal_values(got.astype(np.float64), rounded)
    assert_equal_values(total.astype(np.float64), doubled)
