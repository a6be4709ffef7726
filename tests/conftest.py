"""Fixtures every test file shares."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """In-process tests run torch on one thread, as the scripts run under test do (OMP_NUM_THREADS=1 where set):
    the machine is small and shared, and two threads contending for a core run a CNN far slower.
    The session's thread count is given back afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
