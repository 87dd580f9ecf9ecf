"""The tiled layout kernels compile for sm_90 with 16-byte vector loads and stores (the point of the tiled
paths: see backends/triton/layout/move.py).  Compiled offline in a subprocess without TRITON_INTERPRET, so
it runs on the CPU CI machine as well (Triton bundles ptxas)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def ptx_counts():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    probe = pathlib.Path(__file__).with_name("_codegen_probe.py")
    res = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, env=env, timeout=600)
    if res.returncode != 0:
        if "ptxas" in res.stderr and ("not found" in res.stderr or "No such file" in res.stderr):
            pytest.skip("no ptxas to compile for sm_90")
        raise AssertionError(res.stderr[-4000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["rows", "rows_i64", "flipud", "transpose", "transpose_f32", "rinter"])
def test_tiled_layout_kernels_use_16_byte_accesses(ptx_counts, case):
    c = ptx_counts[case]
    assert c["ld.global.v4"] > 0 and c["st.global.v4"] > 0, (case, c)
    assert c["ld.global.b16"] == 0, (case, c)   # no scalar 2-byte loads left on these paths
