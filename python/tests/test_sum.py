"""sum against the exact reference, NumPy and PyTorch: broadcasting, every floating type,
layouts, many inputs."""

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import cumulus
from helpers import make, random_values
from reference import (FLOATS, as_values, assert_equal_values, exact, sum_reference, ulp)

U = Fraction(1, 1 << 53)


@st.composite
def operand_shapes(draw):
    """A broadcast shape and 1-8 input shapes that broadcast to it."""
    out = draw(st.lists(st.integers(0, 5), min_size=0, max_size=4))
    count = draw(st.integers(1, 8))
    shapes = []
    for _ in range(count):
        drop = draw(st.integers(0, len(out)))
        shape = [d if not draw(st.booleans()) else 1 for d in out[drop:]]
        shapes.append(tuple(shape))
    return shapes


def check_sum(dtype, values, got, mode):
    exact_out, rounded = sum_reference(values, dtype)
    got = as_values(got)
    assert got.shape == rounded.shape
    if mode == "exact":
        assert_equal_values(got, rounded)
        return
    magnitude, _ = sum_reference([np.abs(v) for v in values], dtype)
    n = len(values)
    for index in np.ndindex(got.shape):
        g, e, r = float(got[index]), exact_out[index], float(rounded[index])
        if g == r:
            continue
        acc = n * U / (1 - n * U) * Fraction(magnitude[index])
        err = abs(Fraction(g) - e)
        if dtype == "float64":
            assert err <= acc, (index, g, float(e))
        else:
            half = ulp(r, dtype) / 2
            assert err <= max(ulp(r, dtype), ulp(g, dtype)) + (acc if acc > half else 0), \
                (index, g, float(e), r)


@given(dtype=st.sampled_from(FLOATS), shapes=operand_shapes(),
       mode=st.sampled_from(["exact", "wide"]), seed=st.integers(0, 2**32 - 1))
def test_sum_matches_exact_reference(dtype, shapes, mode, seed):
    rng = np.random.default_rng(seed)
    values = [random_values(rng, dtype, s, mode) for s in shapes]
    kind = "torch" if dtype == "bfloat16" else "numpy"
    arrays = [make(v, dtype, kind) for v in values]
    got = cumulus.sum(*arrays)
    assert type(got) is type(arrays[0])
    assert str(got.dtype).replace("torch.", "") == dtype
    check_sum(dtype, values, got, mode)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_sum_layouts(rng, dtype):
    base = make(random_values(rng, dtype, (6, 8), "exact"), dtype)
    other = make(random_values(rng, dtype, (8, 6), "exact"), dtype)
    misaligned = np.frombuffer(b"\0" + base.tobytes(), dtype=dtype, offset=1).reshape(6, 8)
    cases = [
        (base, other.T),
        (base[::-1], other.T[:, ::-1], base[:, 0:1]),
        (base.astype(np.dtype(dtype).newbyteorder()), misaligned),
        (base.astype(np.dtype(dtype).newbyteorder()), base),
        (base, base.astype(np.dtype(dtype).newbyteorder())),
        (np.asfortranarray(base), base[0], np.array(base[1, 1])),
        (base[:0], base[0]),
        (np.broadcast_to(base[2], (6, 8)), base),
    ]
    for arrays in cases:
        values = [np.asarray(a).astype(np.float64) for a in arrays]
        got = cumulus.sum(*arrays)
        assert got.dtype == np.dtype(dtype) and got.dtype.isnative
        check_sum(dtype, values, got, "exact")


def test_sum_of_scalars_is_0d():
    got = cumulus.sum(np.float32(1), np.float32(2))
    assert isinstance(got, np.ndarray) and got.shape == () and got == 3


def test_sum_against_numpy_and_torch(rng):
    """On float64 integers NumPy's chained add is exact, as is cumulus; torch too."""
    shapes = [(7, 1, 5), (3, 1), (5,), ()]
    arrays = [rng.integers(-100, 100, s).astype(np.float64) for s in shapes]
    expected = arrays[0] + arrays[1] + arrays[2] + arrays[3]
    np.testing.assert_array_equal(cumulus.sum(*arrays), expected)
    tensors = [torch.from_numpy(a) for a in arrays]
    got = cumulus.sum(*tensors)
    assert isinstance(got, torch.Tensor)
    assert torch.equal(got, tensors[0] + tensors[1] + tensors[2] + tensors[3])


def test_sum_adds_in_double_and_rounds_once():
    """float32: 1 + 2^-24 + 2^-24 is 1 + 2^-23 exactly (chained float32 adds give 1)."""
    one = np.ones(4, np.float32)
    tiny = np.full(4, 2.0**-24, np.float32)
    np.testing.assert_array_equal(cumulus.sum(one, tiny, tiny), np.float32(1 + 2.0**-23))
    assert ((one + tiny) + tiny == 1).all()
    h = torch.tensor([1.0], dtype=torch.bfloat16)
    t = torch.tensor([2.0**-8], dtype=torch.bfloat16)
    assert cumulus.sum(h, t, t).item() == 1 + 2.0**-7
    assert ((h + t) + t).item() == 1


def test_sum_many_inputs(rng):
    """More inputs than the kernels hold in registers at once."""
    values = [random_values(rng, "float32", (3, 5), "exact") for _ in range(40)]
    got = cumulus.sum(*[make(v, "float32") for v in values])
    _, rounded = sum_reference(values, "float32")
    assert_equal_values(got.astype(np.float64), rounded)
    assert exact(values[0][0, 0]) == Fraction(float(values[0][0, 0]))
