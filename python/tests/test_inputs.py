"""What goes in and comes out: NumPy, torch and other DLPack producers; out= and in place;
no copies of dense inputs (probed with the memory limit, which every cumulus allocation
passes)."""

import warnings

import numpy as np
import pytest
import torch

import cumulus

HALF_TYPES = [torch.float16, torch.bfloat16]


class Foreign:
    """A DLPack producer that is neither NumPy nor torch."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return torch.utils.dlpack.to_dlpack(self.tensor)

    def __dlpack_device__(self):
        return (1, 0)


def test_kinds_follow_the_input():
    x = np.arange(6, dtype=np.float32)
    assert isinstance(cumulus.cumsum(x), np.ndarray)
    t = torch.arange(6, dtype=torch.float32)
    assert isinstance(cumulus.cumsum(t), torch.Tensor)
    assert isinstance(cumulus.sum(t, t), torch.Tensor)
    assert isinstance(cumulus.sum(x, t), np.ndarray)  # the first argument's kind
    foreign = cumulus.cumsum(Foreign(t))
    assert isinstance(foreign, np.ndarray) and foreign.tolist() == [0, 1, 3, 6, 10, 15]


def test_array_api_producer_gets_its_own_kind():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpy.array_api is experimental
        import numpy.array_api as xp
    a = xp.asarray([1.0, 2.0, 3.0], dtype=xp.float64)
    got = cumulus.cumsum(a)
    assert type(got) is type(a)
    assert np.asarray(got).tolist() == [1.0, 3.0, 6.0]


@pytest.mark.parametrize("dtype", HALF_TYPES + [torch.float32, torch.int64])
def test_torch_in_and_out_without_copies(dtype):
    """out= is written where it is: the same tensor, the same memory."""
    x = torch.arange(1, 9, dtype=dtype).reshape(2, 4)
    out = torch.empty_like(x)
    pointer = out.data_ptr()
    got = cumulus.cumsum(x, 1, out=out)
    assert got is out and out.data_ptr() == pointer
    expected = torch.tensor([[1, 3, 6, 10], [5, 11, 18, 26]]).to(dtype)
    assert torch.equal(out, expected)
    # In place: the tensor's own memory holds the result.
    pointer = x.data_ptr()
    assert cumulus.cumsum(x, 1, out=x) is x and x.data_ptr() == pointer
    assert torch.equal(x, expected)


@pytest.mark.parametrize("dtype", HALF_TYPES)
def test_dense_torch_inputs_are_not_copied(dtype):
    """With out= given, a dense input needs no cumulus allocation at all: it passes a memory
    limit far below its size, where a transposed one (which must be copied) does not."""
    x = torch.ones(256, 256, dtype=dtype)
    out = torch.empty_like(x)
    cumulus.set_memory_limit(1024)
    cumulus.cumsum(x, 0, out=out)
    cumulus.sum(x, x, out=out)
    with pytest.raises(cumulus.LimitError):
        cumulus.cumsum(x.t(), 0, out=out)
    cumulus.set_memory_limit(1 << 40)
    assert torch.equal(cumulus.cumsum(x.t(), 0, out=out), torch.cumsum(x.t().float(), 0).to(dtype))


def test_dense_numpy_inputs_are_not_copied():
    x = np.ones((256, 256), np.float32)
    out = np.empty_like(x)
    cumulus.set_memory_limit(1024)
    cumulus.cumsum(x, 1, out=out)
    cumulus.cumprod(x, None, out=out.reshape(-1))
    cumulus.sum(x, x[0], out=out)
    for copied in (x.T, x[::-1], x.astype(">f4")):
        with pytest.raises(cumulus.LimitError):
            cumulus.cumsum(copied, 1, out=out)


def test_results_are_exported_without_copies():
    """A torch result is cumulus's buffer handed over through DLPack: writes through it are
    seen by a second view of the same tensor."""
    t = cumulus.cumsum(torch.arange(4, dtype=torch.bfloat16))
    view = t[1:]
    view[0] = 42
    assert t[1].item() == 42


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint64", "float16"])
def test_out_in_place_and_views(dtype):
    a = np.arange(1, 13).astype(dtype).reshape(3, 4)
    expected = np.cumsum(a, 1, dtype=dtype)
    y = a.copy()
    assert cumulus.cumsum(y, 1, out=y) is y
    np.testing.assert_array_equal(y, expected)
    # A strided out: written element by element, its neighbours untouched.
    big = np.zeros((3, 8), dtype)
    assert cumulus.cumsum(a, 1, out=big[:, ::2]) is not None
    np.testing.assert_array_equal(big[:, ::2], expected)
    assert (big[:, 1::2] == 0).all()
    # A non-native out takes the values in its own byte order.
    swapped = np.zeros((3, 4), np.dtype(dtype).newbyteorder())
    cumulus.cumsum(a, 1, out=swapped)
    np.testing.assert_array_equal(swapped, expected)
    # In place through a view that is not dense.
    b = np.arange(1, 13).astype(dtype).reshape(3, 4)
    v = b[:, ::-1]
    cumulus.cumsum(v, 1, out=v)
    np.testing.assert_array_equal(b[:, ::-1], np.cumsum(a[:, ::-1], 1, dtype=dtype))


def test_out_overlapping_the_input_partly():
    """Overlap other than in place is computed through a temporary, as NumPy does."""
    a = np.arange(1, 11, dtype=np.int64)
    cumulus.cumsum(a[:-1], out=a[1:])
    np.testing.assert_array_equal(a, [1, 1, 3, 6, 10, 15, 21, 28, 36, 45])
    s = np.arange(6, dtype=np.float64)
    cumulus.sum(s[:3], s[3:], out=s[1:4])
    np.testing.assert_array_equal(s, [0, 3, 5, 7, 4, 5])
    # Long enough that writing out while reading the inputs would read results back.
    s = np.arange(2001, dtype=np.float32)
    expected = s.copy()
    expected[1:1001] = s[:1000] + s[1000:2000]
    cumulus.sum(s[:1000], s[1000:2000], out=s[1:1001])
    np.testing.assert_array_equal(s, expected)
    # out= as a broadcast input of Sum.
    r = np.ones((3, 3))
    cumulus.sum(r[0:1], np.ones((3, 3)), out=r)
    np.testing.assert_array_equal(r, np.full((3, 3), 2.0))


def test_sum_in_place_over_an_input():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones(3, np.float32)
    assert cumulus.sum(a, b, out=a) is a
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) + 1)


def test_sum_in_place_over_inputs_of_its_shape():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    assert cumulus.sum(a, b, a, out=a) is a
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2 + 1)
    assert cumulus.sum(a, b, out=b) is b
    np.testing.assert_array_equal(b, np.arange(6).reshape(2, 3) * 2 + 2)


def test_torch_views_and_non_contiguous_out():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    np.testing.assert_array_equal(cumulus.cumsum(t.t(), 1).numpy(), torch.cumsum(t.t(), 1).numpy())
    np.testing.assert_array_equal(cumulus.cumsum(t[:, 1:3], 0).numpy(),
                                  torch.cumsum(t[:, 1:3], 0).numpy())
    out = torch.zeros(3, 3).t()
    assert not out.is_contiguous()
    assert cumulus.cumsum(t[:, :3], 0, out=out) is out
    assert torch.equal(out, torch.cumsum(t[:, :3], 0))


def test_zero_d_and_empty_torch():
    assert cumulus.cumsum(torch.tensor(5.0)).tolist() == [5.0]
    e = cumulus.cumsum(torch.zeros(0, 3, dtype=torch.float16), 1)
    assert isinstance(e, torch.Tensor) and e.shape == (0, 3) and e.dtype == torch.float16
    assert cumulus.sum(torch.tensor(1.5), torch.tensor(2.0)).item() == 3.5


def test_ml_dtypes_bfloat16_when_installed():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1, 2, 3], dtype=ml_dtypes.bfloat16)
    got = cumulus.cumsum(x)
    assert got.dtype == x.dtype and got.astype(np.float32).tolist() == [1, 3, 6]
