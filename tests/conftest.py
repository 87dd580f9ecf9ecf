import os

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_report_header(config):
    from baracuda.testing import test_device

    return f"baracuda test device: {test_device()}  TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '0')}"


@pytest.fixture(autouse=True)
def _no_unreported_value_errors():
    """A test that leaves a deferred device-side value check queued (PlanPreference.check_values) fails here
    instead of the error surfacing in whichever test calls baracuda next."""
    yield
    from baracuda._core import checks

    if checks.PENDING:
        checks.check_errors()
