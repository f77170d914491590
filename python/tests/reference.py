"""An exact reference for the tests, sharing no code with cumulus: Python integers and
fractions.Fraction compute every prefix exactly; one correctly rounded step takes it to the
element type (round to nearest, ties to even, overflow to infinity)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

# (precision in bits including the implicit one, smallest normal exponent, largest exponent)
FLOAT_FORMATS = {
    "float16": (11, -14, 15),
    "bfloat16": (8, -126, 127),
    "float32": (24, -126, 127),
    "float64": (53, -1022, 1023),
}
INT_BITS = {"int32": (32, True), "int64": (64, True), "uint32": (32, False), "uint64": (64, False)}
FLOATS = list(FLOAT_FORMATS)
INTS = list(INT_BITS)
DTYPES = FLOATS + INTS
# The types NumPy 1.24 has (bfloat16 comes through torch).
NUMPY_DTYPES = [d for d in DTYPES if d != "bfloat16"]


def exact(v) -> Fraction | int:
    """The exact value of one element (a Python float holds every value of these types)."""
    if isinstance(v, (int, np.integer)):
        return int(v)
    return Fraction(float(v))


def round_to(value: Fraction, dtype: str) -> float:
    """value rounded once to dtype, as a Python float (which holds it exactly)."""
    precision, emin, emax = FLOAT_FORMATS[dtype]
    if value == 0:
        return 0.0
    sign = -1.0 if value < 0 else 1.0
    a = abs(value)
    # The exponent e with 2^e <= a < 2^(e+1), clamped to the subnormal range.
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - precision + 1)  # the spacing of values at this exponent
    q, rest = divmod(a, quantum)
    if rest * 2 > quantum or (rest * 2 == quantum and q % 2 == 1):
        q += 1
    rounded = q * quantum
    largest = (2 - Fraction(2) ** (1 - precision)) * Fraction(2) ** emax
    if rounded > largest:
        return sign * math.inf
    return sign * float(rounded)


def ulp(value: float, dtype: str) -> Fraction:
    """The spacing of dtype's values at |value| (at the largest binade for infinity)."""
    precision, emin, emax = FLOAT_FORMATS[dtype]
    if math.isinf(value):
        return Fraction(2) ** (emax - precision + 1)
    e = max(math.frexp(abs(value))[1] - 1, emin) if value != 0 else emin
    return Fraction(2) ** (e - precision + 1)


def wrap(value: int, dtype: str) -> int:
    bits, signed = INT_BITS[dtype]
    value %= 1 << bits
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def scan_exact(values, op: str, exclusive: bool, reverse: bool) -> list:
    """The exact prefixes of one row: Fractions or Python ints."""
    values = list(values)
    if reverse:
        values.reverse()
    acc = 0 if op == "cumsum" else 1
    out = []
    for v in values:
        if exclusive:
            out.append(acc)
        acc = acc + v if op == "cumsum" else acc * v
        if not exclusive:
            out.append(acc)
    if reverse:
        out.reverse()
    return out


def scan_reference(x: np.ndarray, dtype: str, op: str, axis, exclusive=False, reverse=False):
    """(exact prefixes, rounded prefixes) as object arrays of x's shape (1-D for axis=None).
    x holds the values as float64 (floating types) or Python-int objects (integers)."""
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    moved = np.moveaxis(x, axis, -1)
    exact_out = np.empty(moved.shape, dtype=object)
    for index in np.ndindex(moved.shape[:-1]):
        row = [exact(v) for v in moved[index]]
        exact_out[index] = np.array(scan_exact(row, op, exclusive, reverse) + [None],
                                    dtype=object)[:-1]
    exact_out = np.moveaxis(exact_out, -1, axis)
    return exact_out, round_all(exact_out, dtype)


def round_all(exact_values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype in INT_BITS:
        return np.vectorize(lambda v: wrap(int(v), dtype), otypes=[object])(exact_values)
    return np.vectorize(lambda v: round_to(Fraction(v), dtype), otypes=[float])(exact_values)


def sum_reference(arrays, dtype: str):
    """(exact, rounded) elementwise sums with NumPy broadcasting."""
    shape = np.broadcast_shapes(*[a.shape for a in arrays])
    parts = [np.broadcast_to(a, shape) for a in arrays]
    exact_out = np.empty(shape, dtype=object)
    for index in np.ndindex(shape):
        exact_out[index] = sum((exact(p[index]) for p in parts), Fraction(0))
    return exact_out, round_all(exact_out, dtype)


def as_values(result) -> np.ndarray:
    """A cumulus result (NumPy array or torch tensor) as float64 or Python-int objects."""
    if hasattr(result, "detach"):  # torch
        import torch

        if result.is_floating_point():
            return result.to(torch.float64).numpy()
        return np.array(result.tolist(), dtype=object).reshape(tuple(result.shape))
    a = np.asarray(result)
    if a.dtype.kind in "iu":
        return np.array(a.tolist(), dtype=object).reshape(a.shape)
    return a.astype(np.float64)


def assert_within_ulp(got: np.ndarray, rounded: np.ndarray, dtype: str, ulps: int = 1):
    """Every element within `ulps` of the exactly rounded value (NaN nowhere expected)."""
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == rounded.shape
    for index in np.ndindex(got.shape):
        g, r = float(got[index]), float(rounded[index])
        if g == r:
            continue
        assert not math.isnan(g) and not math.isinf(g) and not math.isinf(r), (index, g, r)
        assert abs(Fraction(g) - Fraction(r)) <= ulps * ulp(r, dtype), (index, g, r, dtype)


def assert_equal_values(got: np.ndarray, expected: np.ndarray):
    """Exactly equal, element for element (floats as values, so -0.0 == 0.0)."""
    assert got.shape == expected.shape, (got.shape, expected.shape)
    bad = [i for i in np.ndindex(got.shape) if got[i] != expected[i]]
    assert not bad, [(i, got[i], expected[i]) for i in bad[:5]]
