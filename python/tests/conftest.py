"""Fixtures of synk's Python tests (run by CTest through run_pytest.py, one process per file).

`group`: a process group of 2 ranks (the seeds' dual-GPU examples), forked once per test module
and closed after it. `rng`: a numpy Generator seeded freshly for every test (differential tests
compare against numpy float64 references on new inputs each run); the seed is printed, so a
failure can be replayed with SYNK_TEST_SEED=<seed>.
"""
import os

import numpy as np
import pytest

import synk


@pytest.fixture(scope="module")
def group():
    n = synk.fork(2)
    yield n
    synk.close()


@pytest.fixture
def rng():
    seed = int(os.environ.get("SYNK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"SYNK_TEST_SEED={seed}")
    return np.random.default_rng(seed)
