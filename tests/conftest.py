import os

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_report_header(config):
    from baracuda.testing import test_device

    return f"baracuda test device: {test_device()}  TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '0')}"
