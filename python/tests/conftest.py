import os
import sys
import zlib

import numpy as np
import pytest
from hypothesis import settings

# The tests import reference.py and helpers.py beside them.
sys.path.insert(0, os.path.dirname(__file__))

import cumulus  # noqa: E402

# Repeatable: the same examples on every run (hypothesis prints any failing one).
settings.register_profile("cumulus", max_examples=40, deadline=None, derandomize=True,
                          print_blob=True)
settings.load_profile("cumulus")


@pytest.fixture(autouse=True)
def restore_settings():
    threads, limit = cumulus.num_threads(), cumulus.memory_limit()
    yield
    cumulus.set_num_threads(threads)
    cumulus.set_memory_limit(limit)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: fixed, and printed for a failing test."""
    seed = zlib.crc32(request.node.nodeid.encode())
    print(f"numpy seed {seed}")
    return np.random.default_rng(seed)
