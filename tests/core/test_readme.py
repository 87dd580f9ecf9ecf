"""The README's Python examples are pasteable: every ```python block runs as written (CPU)."""
from __future__ import annotations

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_readme_block_runs(k):
    pytest.importorskip("torch")
    exec(compile(BLOCKS[k], f"README.md block {k}", "exec"), {"__name__": "readme"})


def test_max_rel_err_equal_infinities():
    import numpy as np

    from baracuda._core.oracle import max_rel_err

    w = np.array([-np.inf, 1.0, 2.0])
    assert max_rel_err(np.array([-np.inf, 1.0, 2.5]), w) == pytest.approx(0.25)
    assert max_rel_err(np.array([np.inf, 1.0, 2.0]), w) == np.inf
