"""The `baracuda` command line on the CPU: info, ops (three formats, --write), explain, demo, bench refusal."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import types

import pytest

import baracuda as bc
from baracuda._core.device import cuda_available
from baracuda._core.sku import Backend
from baracuda.cli import main, parse_attr, parse_shape


def run(capsys, *argv):
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_info(capsys):
    rc, out, _ = run(capsys, "info")
    assert rc == 0
    assert f"baracuda {bc.__version__}" in out
    for mod in ("python", "numpy", "torch", "triton"):
        assert mod in out
    assert "default device:" in out and str(bc.as_device(None).arch) in out
    for b in Backend:
        assert f"  {b}" in out, b
    if not cuda_available():  # every GPU-only backend says why it cannot run on the CPU
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("cublas"))
        assert "unavailable:" in line and "CUDA" in line
    # each NVIDIA library with its version, or why it cannot be loaded
    libs = out.split("NVIDIA libraries:\n")[1].split("\nops:")[0].splitlines()
    assert [ln.split()[0] for ln in libs] == ["cuBLAS", "cuBLASLt", "cuFFT", "cuSOLVER", "cuRAND", "cuDNN"]
    for ln in libs:
        assert re.fullmatch(r"\s+\S+\s+(\d+\.\d+\.\d+.*|not available: .+)", ln), ln


def test_ops_text(capsys):
    rc, out, _ = run(capsys, "ops")
    assert rc == 0
    specs = bc.all_specs()
    assert out.startswith(f"baracuda coverage: {len(specs)} ops")
    names = {ln.split()[0] for ln in out.splitlines()[5:] if ln.strip()}
    assert {s.name for s in specs} <= names


def test_ops_json_matches_specs_and_registry(capsys):
    from baracuda._core.registry import implementations

    rc, out, _ = run(capsys, "ops", "--format", "json")
    assert rc == 0
    cov = json.loads(out)
    by_name = {o["name"]: o for o in cov["ops"]}
    assert set(by_name) == {s.name for s in bc.all_specs()}
    for spec in bc.all_specs():
        o = by_name[spec.name]
        assert o["dtypes"] == [d.short for d in spec.dtypes]
        assert set(o["backends"]) == {str(i.backend) for i in implementations(spec.name)}
        for b, cell in o["backends"].items():
            assert set(cell["bw"]) <= set(cell["fw"])
            if not spec.is_differentiable:
                assert cell["bw"] == []
    assert set(cov["summary"]["no_gpu_implementation"]) == {o["name"] for o in cov["ops"] if not o["gpu"]}


def test_ops_markdown_and_write(capsys, tmp_path):
    rc, out, err = run(capsys, "ops", "--format", "markdown", "--write", "--docs-dir", str(tmp_path))
    assert rc == 0
    assert out.startswith("# baracuda op coverage") and "| op | dtypes |" in out
    assert (tmp_path / "coverage.md").read_text().strip() == out.strip()
    assert json.loads((tmp_path / "coverage.json").read_text())["summary"]["ops"] == len(bc.all_specs())
    assert "wrote" in err


def test_ops_family_filter(capsys):
    fam = sorted(s.family for s in bc.all_specs())[0]
    rc, out, _ = run(capsys, "ops", "--format", "json", "--family", fam)
    assert {o["family"] for o in json.loads(out)["ops"]} == {fam}


def test_explain_lists_chosen_and_refused(capsys):
    rc, out, _ = run(capsys, "explain", "add", "--shape", "16,4096", "--shape", "4096", "--dtype", "bf16",
                     "--device", "cpu", "--forbid", "triton", "--attr", "alpha=2.0")
    assert rc == 0, out
    assert out.startswith("add(bf16[16, 4096], bf16[4096], alpha=2.0)")
    assert "chosen" in out and "reference" in out
    refused = [ln for ln in out.splitlines() if "refused" in ln]
    assert refused and "forbidden by PlanPreference.forbid" in refused[0]


def test_explain_nothing_can_run(capsys):
    rc, out, err = run(capsys, "explain", "exp", "--shape", "8", "--device", "cpu", "--forbid", "reference",
                       "--forbid", "triton", "--deterministic", "--tf32")
    assert rc == 1
    assert out.count("refused") >= 2
    assert "no backend can run" in err


def test_explain_bad_problem(capsys):
    rc, _, err = run(capsys, "explain", "add", "--shape", "3,4", "--shape", "5", "--device", "cpu")
    assert rc == 2 and "InvalidProblemError" in err and "'b'" in err
    rc, _, err = run(capsys, "explain", "add", "--shape", "3", "--shape", "3", "--dtype", "f32", "--dtype", "f32",
                     "--dtype", "f32")
    assert rc == 2 and "one --dtype" in err
    rc, _, err = run(capsys, "explain", "exp", "--shape", "3", "--prefer", "nope")
    assert rc == 2 and "nope" in err


def test_parse_shape_and_attr():
    assert parse_shape("16,4096") == (16, 4096)
    assert parse_shape("16x4096") == (16, 4096)
    assert parse_shape("(3, 5)") == (3, 5)
    assert parse_shape("") == () and parse_shape("scalar") == ()
    with pytest.raises(argparse.ArgumentTypeError, match="shape"):
        parse_shape("a,b")
    assert parse_attr("dim=-1") == ("dim", -1)
    assert parse_attr("dims=[0, 1]") == ("dims", (0, 1))
    assert parse_attr("approximate=tanh") == ("approximate", "tanh")
    assert parse_attr("keepdim=True") == ("keepdim", True)
    assert parse_attr("dims=None") == ("dims", None)
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=VALUE"):
        parse_attr("dim")


def test_demo_passes_arguments(capsys, monkeypatch):
    seen = []
    fake = types.ModuleType("baracuda.demo")
    fake.main = lambda argv: seen.append(argv) or 0
    monkeypatch.setitem(sys.modules, "baracuda.demo", fake)
    rc, _, _ = run(capsys, "demo", "--size", "3")
    assert rc == 0 and seen == [["--size", "3"]]


@pytest.mark.skipif(cuda_available(), reason="a GPU is present: bench would time")
def test_bench_needs_a_gpu(capsys):
    rc, _, err = run(capsys, "bench", "--op", "add")
    assert rc == 2
    assert "needs a CUDA GPU" in err and "--cpu-smoke" in err
    rc, _, err = run(capsys, "bench", "--cpu-smoke")
    assert rc == 2 and "--quick" in err


def test_bench_unknown_op(capsys):
    rc, _, err = run(capsys, "bench", "--quick", "--cpu-smoke", "--op", "no_such_op")
    assert rc == 2 and "no_such_op" in err


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "baracuda.cli", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    for cmd in ("info", "ops", "explain", "demo", "bench"):
        assert cmd in r.stdout
