"""No memory grows over 10,000 calls of every kind (results, copies, torch, out=, errors)."""

import os

import numpy as np
import torch

import cumulus
import cumulus.onnx
from test_onnx import scan_model


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_no_growth_over_10000_calls():
    x = np.ones(8192)  # 64 KiB: a leaked result or copy would add 640 MiB
    strided = np.ones(16384)[::2]
    t = torch.ones(8192, dtype=torch.bfloat16)
    out = np.empty(8192)
    model = cumulus.onnx.load(scan_model())
    feeds = {"x": x.astype(np.float32), "axis": np.array(0)}

    def calls():
        cumulus.cumsum(x)
        cumulus.cumprod(strided, 0, exclusive=True)
        cumulus.sum(x, x)
        cumulus.cumsum(t)
        cumulus.cumsum(x, out=out)
        cumulus.cumsum(x.tolist()[:8])
        model.run(feeds)
        try:
            cumulus.cumsum(x, 3)
        except cumulus.InvalidArgumentError:
            pass
        try:
            cumulus.cumsum(torch.zeros(3, requires_grad=True))
        except cumulus.UnsupportedTypeError:
            pass

    for _ in range(1000):
        calls()
    before = resident_bytes()
    for _ in range(10_000):
        calls()
    growth = resident_bytes() - before
    assert growth < 4 << 20, f"resident memory grew by {growth} bytes"
