"""Offline sm90 compile of the cross-entropy and CTC kernels (no GPU needed: Triton's bundled ptxas / cuobjdump):
they build for the H100/H200 with no register spills, the long-row streaming kernels use 16-byte loads
(ld.global.v4) when C and the chunk are multiples of 16, N-D inputs with D % ROWS == 0 load and store 16-byte
vectors along the unit-stride trailing dims, and the single-read backward stays within 128 registers
at 8 warps (2 programs per SM; its launcher sizes the persistent grid from the compiled kernel), without a
spill for f32 logits at their 128-register cap."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import triton

_CHECK = r'''
import os, re, subprocess, tempfile, triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from baracuda.backends.triton.loss import ce_coop as K, ce_kernels as L, ctc as X
bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")

def usage(k, sig, ce, warps, div=(), maxnreg=None):
    names = k.arg_names
    full = {}
    for n in names:
        if n in ce:
            full[n] = "constexpr"
        elif n.endswith("_ptr"):
            full[n] = sig.get(n, "*fp32")
        else:
            full[n] = sig.get(n, "i32")
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div if n in names}
    c = triton.compile(ASTSource(fn=getattr(k, "jit", k), signature=full, constexprs=ce, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=warps, **({"maxnreg": maxnreg} if maxnreg else {})))
    f = tempfile.NamedTemporaryFile(suffix=".cubin", delete=False)
    f.write(c.asm["cubin"]); f.close()
    res = subprocess.run([os.path.join(bindir, "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    return int(re.search(r"REG:(\d+)", res).group(1)), int(re.search(r"STACK:(\d+)", res).group(1)), c.asm["ptx"]

bf = {"x_ptr": "*bf16", "w_ptr": "*bf16", "t_ptr": "*i64", "g_ptr": "*bf16", "dx_ptr": "*bf16", "loss_ptr": "*bf16"}
tile, rows, warps, split, chunk = L.choose(4096, 128256, 1, 2)
common = dict(HAS_W=False, PROB=False, SMOOTH=True, ND=False, F64=False, I64=False)
r, s, ptx = usage(L._ce_part, bf, dict(common, sxc=1, FIN=True, NONE=False, ROWS=rows, TILE=tile), warps,
                 ["x_ptr", "sxn", "C", "CHUNK"])
assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx, "part: no 16-byte loads"
print("part", r, s)
r, s, _ = usage(L._ce_fin, bf, dict(common, NONE=False, SPLIT=4, BLOCK=256), 4)
print("fin", r, s)
for fused in (False, True):
    r, s, ptx = usage(L._ce_grad, bf, dict(common, sxc=1, RED=2, SPLIT=1, FUSED=fused, NEED_B=fused, ROWS=rows, TILE=tile), warps, ["x_ptr", "dx_ptr", "sxn", "C", "CHUNK"])
    assert s == 0 and ("v4.b32" in ptx), ("grad spills or no 16-byte access", fused, s)
    print("grad fused" if fused else "grad", r, s)
r, s, _ = usage(L._ce_part, dict(bf, t_ptr="*bf16"), dict(common, PROB=True, ND=1, FIN=False, NONE=False, ROWS=64,
                                                                    TILE=32), 4)
print("part nd prob", r, s)
# N-D with D % ROWS == 0 (segmentation maps): the hinted row offsets give 16-byte loads along the unit-stride j
for k, extra in ((L._ce_part, dict(FIN=True, NONE=True)), (L._ce_grad, dict(RED=2, SPLIT=1, FUSED=True, NEED_B=True))):
    r, s, ptx = usage(k, bf, dict(common, sxd=1, ND=2, ROWS=64, TILE=32, **extra), 4,
                      ["x_ptr", "dx_ptr", "sxn", "sxc", "D", "C", "CHUNK", "R"])
    assert s == 0 and "v4.b32" in ptx, ("nd loads/stores not vectorized", k.fn.__name__ if hasattr(k, "fn") else k)
    print("nd aligned", r, s)
for f64 in (False, True):
    p = {"x_ptr": "*fp64" if f64 else "*bf16", "dx_ptr": "*fp64" if f64 else "*bf16", "g_ptr": "*fp64" if f64 else "*bf16",
         "w_ptr": "*fp64" if f64 else "*bf16", "part_ptr": "*fp64" if f64 else "*fp32", "den_ptr": "*fp64" if f64 else "*fp32",
         "eps_ptr": "*fp64" if f64 else "*fp32", "wsum_ptr": "*fp64" if f64 else "*fp32", "cnt_ptr": "*i32", "t_ptr": "*i64",
         "loss_ptr": "*fp64" if f64 else "*fp32"}
    for loss in (False, True):   # LOSS: cross_entropy_with_grad (forward + gradient in one read)
        r, s, ptx = usage(K._ce_bw_coop, p, dict(HAS_W=True, SMOOTH=True, RED=2, F64=f64, CHUNK=K.CHUNK, SP=16,
                                                 I64=False, LOSS=loss), K.WARPS, ["x_ptr", "dx_ptr", "sxn", "C"],
                          maxnreg=None if f64 else K.MAXNREG[True])
        assert s <= (128 if f64 else 64) and (f64 or r <= 128), ("coop", f64, loss, r, s)   # (f64: 1 per SM anyway)
        print("coop", f64, loss, r, s)
# f32 logits run at the 4-byte cap (128 registers, 2 programs per SM): no spill without class weights
f32p = {"x_ptr": "*fp32", "dx_ptr": "*fp32", "g_ptr": "*fp32", "w_ptr": "*fp32", "cnt_ptr": "*i32", "t_ptr": "*i64"}
for loss in (False, True):
    r, s, _ = usage(K._ce_bw_coop, f32p, dict(HAS_W=False, SMOOTH=False, RED=2, F64=False, CHUNK=K.CHUNK, SP=16,
                                              I64=False, LOSS=loss), K.WARPS, ["x_ptr", "dx_ptr", "sxn", "C"],
                    maxnreg=K.maxnreg(False, 4))
    assert s == 0 and r <= 128, ("coop f32", loss, r, s)
    print("coop f32", loss, r, s)
r, s, _ = usage(L._nll_fw, bf, dict(HAS_W=True, NONE=True, ND=1, F64=False, BLOCK=1024, I64=False), 4)
r, s, _ = usage(L._nll_bw, bf, dict(HAS_W=True, RED=0, ND=False, F64=False, ROWS=1, TILE=4096, I64=True), 8)
r, s, _ = usage(L._denom, bf, dict(HAS_W=True, PROB=False, ND=1, F64=False, BLOCK=1024), 4)
r, s, _ = usage(L._denom_blk, bf, dict(HAS_W=True, PROB=False, ND=2, F64=False, BLOCK=1024), 4)
cp = {"lp_ptr": "*bf16", "tg_ptr": "*i64", "off_ptr": "*i64", "il_ptr": "*i64", "tl_ptr": "*i64", "gout_ptr": "*bf16",
      "loss_ptr": "*fp32", "ws_ptr": "*fp32", "g_ptr": "*fp32"}
for grad in (False, True):
    r, s, _ = usage(X._ctc, cp, dict(GRAD=grad, RED=2, ZINF=True, NONE=False, F64=False, BLOCK_S=512), 4)
    print("ctc", grad, r, s)
r, s, _ = usage(X._ctc, dict(cp, lp_ptr="*fp64", gout_ptr="*fp64", loss_ptr="*fp64", ws_ptr="*fp64", g_ptr="*fp64"),
                dict(GRAD=True, RED=0, ZINF=False, NONE=True, F64=True, BLOCK_S=2048), 8)
print("ctc f64", r, s)
print("ok")
'''
_CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


@pytest.mark.skipif(not os.path.exists(_CUOBJDUMP), reason="Triton's bundled cuobjdump not found")
def test_cross_entropy_and_ctc_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
