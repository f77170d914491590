"""The Python package at work: NumPy arrays and a torch bfloat16 tensor, scanned without
copies. Run by scripts/examples.sh after it installs the package."""

import numpy as np
import torch

import cumulus

print("cumulus", cumulus.__version__, "kernels:", cumulus.kernel_isa(),
      "threads:", cumulus.num_threads())
print(">>> cumulus.cumsum(numpy.arange(5))")
print(cumulus.cumsum(np.arange(5)))

x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
print(">>> cumulus.cumprod(x, axis=1, exclusive=True)  # x = [[1 2 3] [4 5 6]]")
print(cumulus.cumprod(x, axis=1, exclusive=True))
print(">>> cumulus.sum(x, x[0], numpy.float32(0.5))  # ONNX Sum: elementwise, broadcasting")
print(cumulus.sum(x, x[0], np.float32(0.5)))

t = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.bfloat16)
print(">>> cumulus.cumsum(t, reverse=True)  # torch bfloat16 in, torch bfloat16 out")
print(cumulus.cumsum(t, reverse=True))
out = torch.empty_like(t)
print(">>> cumulus.cumsum(t, out=out) is out")
print(cumulus.cumsum(t, out=out) is out)
