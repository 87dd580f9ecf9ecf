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


def test_demo_passes_without_warnings(capsys):
    pytest.importorskip("torch")
    import warnings

    from baracuda import demo

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert demo.main(["--device", "cpu", "--seq", "8", "--dim", "32", "--reps", "2"]) == 0
    out = capsys.readouterr().out
    assert "demo: PASS" in out and "median of 2" in out
