"""Arrays of every element type for the tests: NumPy for the types NumPy has, torch for
bfloat16 (and wherever torch is asked for)."""

from __future__ import annotations

import numpy as np
import torch

TORCH_TYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
               "float64": torch.float64, "int32": torch.int32, "int64": torch.int64}


def make(values, dtype: str, kind: str = "numpy"):
    """An array of dtype holding `values` (each exactly representable in it)."""
    if dtype == "bfloat16" or kind == "torch":
        a = np.asarray(values)
        if dtype in ("uint32", "uint64"):
            raise ValueError("torch 1.13 has no " + dtype)
        if a.dtype.kind == "f":
            return torch.from_numpy(a.astype(np.float64)).to(TORCH_TYPES[dtype])
        return torch.tensor(a.tolist(), dtype=TORCH_TYPES[dtype]).reshape(a.shape)
    if dtype in ("int32", "int64", "uint32", "uint64"):
        values = np.asarray(values, dtype=object)
        return np.array(values.tolist(), dtype=dtype).reshape(values.shape)
    return np.asarray(values, dtype=np.float64).astype(dtype)


def random_values(rng: np.random.Generator, dtype: str, shape, mode: str = "exact") -> np.ndarray:
    """Random values of dtype as float64 (or Python ints for integers).

    mode "exact": values whose sums of up to 512 terms (8192 for float16) are exact in double,
    so cumulus's double accumulation must give the exactly rounded result. "wide": any finite
    value of the type. "product": values in [0.5, 2] (and integers in [-3, 3]) for CumProd.
    """
    shape = tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype in ("int32", "int64", "uint32", "uint64"):
        bits = int(dtype[-2:])
        if mode == "product":
            v = rng.integers(-3, 4, n) if dtype[0] == "i" else rng.integers(0, 4, n)
            return np.array([int(x) for x in v], dtype=object).reshape(shape)
        raw = [int(x) for x in rng.integers(0, (1 << bits) - 1, n, dtype=np.uint64,
                                             endpoint=True)]
        v = [x - (1 << bits) if dtype[0] == "i" and x >> (bits - 1) else x for x in raw]
        return np.array(v, dtype=object).reshape(shape)
    if mode == "product":
        v = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    elif mode == "exact":
        # A mantissa of the type's width at exponents in a narrow range.
        mant_bits, exp_range = {"float16": (11, 15), "bfloat16": (8, 20), "float32": (24, 10),
                                "float64": (40, 0)}[dtype]
        mant = rng.integers(-(1 << mant_bits) + 1, 1 << mant_bits, n).astype(np.float64)
        exps = rng.integers(-exp_range, exp_range + 1, n) - mant_bits
        if dtype == "float16":
            exps = np.maximum(exps, -24)
        v = np.ldexp(mant, exps)
    else:  # wide: random bit patterns of the type, without NaN and infinity
        v = wide_values(rng, dtype, n)
    return round_values(v, dtype).reshape(shape)


def wide_values(rng, dtype, n):
    if dtype == "float64":
        bits = rng.integers(0, 1 << 63, n, dtype=np.uint64) | (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63))
        v = bits.view(np.float64)
    elif dtype == "float32":
        v = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    elif dtype == "float16":
        v = rng.integers(0, 1 << 16, n).astype(np.uint16).view(np.float16)
    else:
        u = rng.integers(0, 1 << 16, n).astype(np.uint32) << np.uint32(16)
        v = u.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        v = v.astype(np.float64)
    return np.where(np.isfinite(v), v, 1.0)


def round_values(v: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values made representable in dtype (exactly, for the ones that already are)."""
    if dtype == "bfloat16":
        return torch.from_numpy(v).to(torch.bfloat16).to(torch.float64).numpy()
    return v.astype(dtype).astype(np.float64)
