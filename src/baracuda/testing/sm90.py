"""Compile Triton kernels for the H100 (sm_90) on a machine with no GPU, exactly as a launch would.

Triton's CUDA backend (its bundled ptxas and cuobjdump included) runs offline, so a GPU-only compiler crash
(an MLIR pass asserting, a ptxas error) or a register spill can be caught in CI on the CPU.  Two pieces:

- ``offline_launches()``: while active, ``kernel[grid](...)`` compiles the kernel for sm_90 instead of running
  it.  The arguments are specialised by the launcher's own binder, so the compiled kernel is the one the GPU
  would build for the same host code: integer arguments equal to 1 become constants, arguments divisible by 16
  (pointers: 16-byte aligned) get the divisibility hint -- crashes often depend on exactly these.  Host code
  (a plan's run function) can be driven with CPU torch tensors; no kernel runs, outputs stay unwritten.
  It stands in for ``JITFunction.run`` of Triton 3.6 and uses its binder and ``_pack_args``: a Triton upgrade
  that changes them makes the tests using this fail loudly, not skip.
- ``run_isolated(code)``: runs Python code in a fresh interpreter without TRITON_INTERPRET (the kernels must
  be real JITFunctions).  A compiler assertion aborts the process; isolated, it fails one test instead of
  killing pytest.

Typical test (tests/softmax_gumbel_sparsemax/test_gumbel_sparsemax_sm90.py)::

    r = run_isolated(SCRIPT)          # SCRIPT uses offline_launches() and prints "ok" at the end
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import sys
import tempfile

__all__ = ["unavailable", "offline_launches", "Launch", "resources", "run_isolated", "failure_report"]


def _bindir() -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


def unavailable() -> str | None:
    """Why an offline sm_90 compile cannot run here (None when it can): Triton's CUDA backend or its
    bundled ptxas/cuobjdump missing."""
    try:
        import triton.backends.nvidia.compiler  # noqa: F401
    except Exception as e:   # pragma: no cover - depends on the Triton build
        return f"Triton's CUDA backend is not importable ({e})"
    for tool in ("ptxas", "cuobjdump"):
        if not os.path.exists(os.path.join(_bindir(), tool)):
            return f"Triton's bundled {tool} not found"
    return None


@dataclasses.dataclass
class Launch:
    """One intercepted launch: the kernel's name, its constexprs (incl. arguments specialised to 1), the
    compile options and the compiled kernel (``.asm["ptx"]``, ``.asm["cubin"]``, ``.metadata``)."""
    name: str
    constexprs: dict
    num_warps: int
    compiled: object

    def resources(self) -> tuple[int, int]:
        return resources(self.compiled)


@contextlib.contextmanager
def offline_launches(capability: int = 90):
    """Within the block, ``jit_fn[grid](*args, **kw)`` compiles for ``cuda:capability`` and returns the
    compiled kernel without launching; the yielded list collects a ``Launch`` per call.  Requires that the
    kernels were created without TRITON_INTERPRET (see ``run_isolated``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    target = GPUTarget("cuda", capability, 32)
    backend = make_backend(target)
    launches: list[Launch] = []
    binders: dict[int, object] = {}
    original = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        binder = binders.get(id(self))
        if binder is None:
            binder = binders[id(self)] = create_function_from_signature(self.signature, self.params, backend)
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound, specialization, options)
        compiled = triton.compile(_source(self)(self, signature, constexprs, attrs), target=target,
                                  options=options.__dict__)
        names = [p.name for p in self.params]
        launches.append(Launch(self.fn.__name__, {names[k[0]]: v for k, v in constexprs.items()},
                               options.num_warps, compiled))
        return compiled

    JITFunction.run = run
    try:
        yield launches
    finally:
        JITFunction.run = original


def _source(fn):
    """The compiler front end of a JITFunction: Gluon kernels (explicit layouts) build their IR with the module's
    warp count already set, which their layouts are verified against."""
    if getattr(fn, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource
        return GluonASTSource
    from triton.compiler import ASTSource
    return ASTSource


def resources(compiled) -> tuple[int, int]:
    """(registers per thread, stack bytes per thread) of a compiled kernel, from the bundled cuobjdump;
    stack > 0 means spills (or local arrays)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    try:
        out = subprocess.run([os.path.join(_bindir(), "cuobjdump"), "-res-usage", f.name], capture_output=True,
                             text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return int(re.search(r"REG:(\d+)", out).group(1)), int(re.search(r"STACK:(\d+)", out).group(1))


def run_isolated(code: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``code`` with this Python in a fresh process, TRITON_INTERPRET removed from its environment.
    A negative returncode is the signal that killed it (-6: an abort, e.g. an LLVM/MLIR assertion)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def failure_report(r: subprocess.CompletedProcess) -> str:
    """A short account of a failed ``run_isolated``: how it ended, the last lines it printed (print what is
    being compiled before compiling it), the compiler's diagnostics (MLIR/LLVM assertions, ``error:`` lines)
    and the end of stderr.  The MLIR reproducer dump in between is left out."""
    how = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
    diag = [ln for ln in r.stderr.splitlines() if re.search(r"Assertion|error:|Error", ln)]
    return "\n".join([how, "--- last output:", *r.stdout.splitlines()[-6:], "--- diagnostics:", *diag[-12:],
                      "--- stderr tail:", r.stderr[-1500:]])
