"""Compile the layout copy kernels for sm_90 (no GPU needed: Triton's bundled ptxas) with the argument
specialization Triton's launcher would derive (16-byte aligned pointers, ints == 1 -> constexpr, ints % 16
== 0 -> divisible) and print, per case, how many 16-byte vector loads/stores and scalar 2-byte loads the PTX
has.  Run by test_layout_codegen.py in a subprocess without TRITON_INTERPRET."""
from __future__ import annotations

import inspect
import json
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from baracuda.backends.triton.layout import move as L
from baracuda.backends.triton.layout import repeat_interleave as R


class Ptr:
    def __init__(self, ty):
        self.ty = ty


def counts(fn, args, constexprs, num_warps=4):
    names = list(inspect.signature(fn.fn).parameters)
    sig, attrs, ce = {}, {}, dict(constexprs)
    for i, n in enumerate(names):
        if n in constexprs:
            continue
        v = args[n]
        if isinstance(v, Ptr):
            sig[n] = v.ty
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif v == 1:
            ce[n] = 1
        else:
            sig[n] = "i64" if abs(v) >= 2 ** 31 else "i32"
            if v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    for k in ce:
        sig[k] = "constexpr"
    k = triton.compile(ASTSource(fn=getattr(fn, "jit", fn), signature=sig, constexprs=ce, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})
    ptx = k.asm["ptx"]
    return {w: len(re.findall(re.escape(w), ptx)) for w in ("ld.global.v4", "st.global.v4", "ld.global.b16")}


def tile_args(shape, dst, N, T, base=0, n_cb=1):
    a = dict(out_ptr=Ptr("*i16"), src_ptr=Ptr("*i16"), fill_ptr=Ptr("*i16"), n_rows=shape[2] * shape[3] * shape[4],
             L=shape[5], n_cb=n_cb, base=base, diag=0)
    a.update({f"S{i}": shape[i] for i in range(1, 5)})
    a.update({f"D{i}": dst[i] for i in range(5)}, DL=dst[5])
    for c, arr in zip("NTOV", (N, T, [0] * 6, [1] * 6)):
        a.update({f"{c}{i}": arr[i] for i in range(5)})
        a[f"{c}L"] = arr[5]
    return a


ROWS = dict(MODE=0, COL_MODE=0, COL_ID=1, OUT_ROWS=True, TRI=0, I64=False, VEC_IN=8, VEC_OUT=8, BR=64, BC=128,
            VIA_F32=False)
out = {}
# permute [8,4096,32,128] by (0,2,1,3), bf16: rows of 128
a = tile_args([1, 1, 8, 32, 4096, 128], [0, 0, 32 * 4096 * 128, 4096 * 128, 128, 1], [1, 1, 8, 32, 4096, 128],
              [0, 0, 4096 * 32 * 128, 128, 32 * 128, 1])
out["rows"] = counts(L._tile_kernel, a, ROWS)
out["rows_i64"] = counts(L._tile_kernel, a, dict(ROWS, I64=True))
# flipud [4096, 4096] bf16
a = tile_args([1, 1, 1, 1, 4096, 4096], [0, 0, 0, 0, 4096, 1], [1, 1, 1, 1, 4096, 4096], [0, 0, 0, 0, -4096, 1],
              base=4095 * 4096, n_cb=4)
out["flipud"] = counts(L._tile_kernel, a, dict(ROWS, BR=8, BC=1024))
# transpose [64, 2048, 2048] -> (0, 2, 1), bf16 and f32
t = dict(out_ptr=Ptr("*i16"), src_ptr=Ptr("*i16"), P=2048, L=2048, n_pb=32, n_lb=16, base=0, TP=1, TL=2048, DP=2048,
         DL=1, S1=1, S2=1, S3=64, T0=0, T1=0, T2=0, T3=2048 * 2048, D0=0, D1=0, D2=0, D3=2048 * 2048)
out["transpose"] = counts(L._transpose_kernel, t, dict(I64=False, BP=64, BL=128, VIA_F32=False), 8)
out["transpose_f32"] = counts(L._transpose_kernel, dict(t, out_ptr=Ptr("*i32"), src_ptr=Ptr("*i32")),
                              dict(I64=True, BP=32, BL=128, VIA_F32=False), 8)
# repeat_interleave with a repeats tensor: x [8, 4096, 128] along dim 1
r = dict(out_ptr=Ptr("*i16"), x_ptr=Ptr("*i16"), cum_ptr=Ptr("*i64"), rows=8 * 8192, total=8192, n=4096, inner=128,
         steps=13, n_cb=2)
out["rinter"] = counts(R._rinter_fwd_kernel, r, dict(I64=False, BR=64, BC=128))
print(json.dumps(out))
