"""`baracuda demo`: a Llama-style block, forward + backward, through ``baracuda.torch``.

Pre-norm attention (RMSNorm, QKV projection, causal scaled-dot-product attention, output projection with a
fused bias epilogue, residual add fused with the next RMSNorm), a SwiGLU MLP (gate+up projection, fused
silu(gate) * up, down projection, residual add fused with the final RMSNorm), and the vocabulary projection fused
with its cross-entropy loss over next-token targets (the logits are never made).  Runs on the best device present (the CPU reference backend when
there is no GPU); prints every op's SKU, time and error against the float64 reference; compares the loss and
every gradient with the same block in plain PyTorch.

On a GPU the default block is the size of a real model's layer (bf16, 4 x 2048 tokens, dim 2048, 16 heads), where
the timing compares kernels; ``--dtype float32 --batch 2 --seq 256 --dim 512 --heads 4`` is the small block earlier
versions ran, whose microsecond kernels make its time the host's (the per-call cost ``baracuda bench --host``
measures).  On the CPU the block is small (f32, 2 x 32 tokens, dim 64).
"""
from __future__ import annotations

import argparse
import math
import sys
import time


def block(bt, x, p, heads: int, use_baracuda: bool = True):
    """The block; ``bt`` is baracuda.torch (or torch itself for the plain-PyTorch comparison).  ``use_baracuda``
    takes baracuda's fused ops where a user of the library would: the residual add with the RMSNorm after it
    (``add_rms_norm``), the SwiGLU split + product (``swiglu``), the vocabulary projection with its loss
    (``linear_cross_entropy``: the [T, V] logits are never made); plain PyTorch runs the same math op by op."""
    import torch

    F = bt.nn.functional
    T, D = x.shape
    hd = D // heads
    S = p["S"]
    B = T // S

    def rms(h, w):
        return F.rms_norm(h, (D,), w, 1e-6)

    def add_rms(h, res, w):         # (res + h, rms_norm(res + h))
        if use_baracuda:
            return bt.call("add_rms_norm", [h, res, w], {"normalized_shape": (D,), "eps": 1e-6})
        s = res + h
        return s, rms(s, w)

    def swiglu(u):
        if use_baracuda:
            return bt.call("swiglu", [u], {"dim": -1})   # fused split + silu(gate) * up, FW and BW
        gate, up = u.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up

    h = rms(x, p["norm1"])
    qkv = F.linear(h, p["w_qkv"])                                   # [T, 3D]
    q, k, v = (t.reshape(B, S, heads, hd).transpose(1, 2) for t in qkv.split(D, dim=-1))  # views
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)     # [B, H, S, hd]
    o = o.transpose(1, 2).reshape(T, D)
    x, h = add_rms(F.linear(o, p["w_o"], p["b_o"]), x, p["norm2"])
    u = F.linear(h, p["w_13"])                                      # [T, 2F]: gate | up
    x, h = add_rms(F.linear(swiglu(u), p["w_2"]), x, p["norm_f"])
    if use_baracuda:
        return F.linear_cross_entropy(h, p["w_vocab"], p["targets"])
    return F.cross_entropy(F.linear(h, p["w_vocab"]), p["targets"])


def make_params(torch, S, B, D, heads, device, dtype, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(device=device, dtype=dtype)

    V = 2 * D
    p = {
        "S": S,
        "norm1": 1.0 + rnd(D, scale=0.1), "norm2": 1.0 + rnd(D, scale=0.1), "norm_f": 1.0 + rnd(D, scale=0.1),
        "w_qkv": rnd(3 * D, D, scale=D ** -0.5), "w_o": rnd(D, D, scale=D ** -0.5), "b_o": rnd(D, scale=0.1),
        "w_13": rnd(2 * 4 * D, D, scale=D ** -0.5), "w_2": rnd(D, 4 * D, scale=(4 * D) ** -0.5),
        "w_vocab": rnd(V, D, scale=D ** -0.5),
        "targets": torch.randint(0, V, (B * S,), generator=g).to(device),
    }
    return p, rnd(B * S, D)


LEAVES = ("w_qkv", "w_o", "b_o", "w_13", "w_2", "w_vocab", "norm1", "norm2", "norm_f")   # what gets gradients


def leaf_copies(params, x0):
    """Fresh leaf copies of the block's parameters and input (each run's own gradients): (params, x)."""
    import torch

    p = {k: (v.detach().clone().requires_grad_(k in LEAVES) if torch.is_tensor(v) else v) for k, v in params.items()}
    return p, x0.detach().clone().requires_grad_()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="baracuda demo", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    ap.add_argument("--dtype", default=None, choices=["float32", "float64", "bfloat16", "float16"],
                    help="default: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--seq", type=int, default=None, help="tokens per sequence (default: 2048 on a GPU, 32 on the CPU)")
    ap.add_argument("--dim", type=int, default=None, help="model width (default: 2048 on a GPU, 64 on the CPU)")
    ap.add_argument("--heads", type=int, default=None, help="default: 16 on a GPU, 4 on the CPU")
    ap.add_argument("--batch", type=int, default=None, help="sequences (default: 4 on a GPU, 2 on the CPU)")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions (default 50 on a GPU, 10 on the CPU)")
    args = ap.parse_args(argv)
    import torch

    import baracuda as bc
    import baracuda.torch as bt

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.startswith("cuda")
    args.dtype = args.dtype or ("bfloat16" if gpu else "float32")
    dtype = getattr(torch, args.dtype)
    S = args.seq or (2048 if gpu else 32)
    D = args.dim or (2048 if gpu else 64)
    B, H = args.batch or (4 if gpu else 2), args.heads or (16 if gpu else 4)
    print(f"baracuda {bc.__version__} demo: Llama-style block, tokens={B}x{S}, dim={D}, heads={H}, "
          f"{args.dtype} on {bc.as_device(device)} ({bc.as_device(device).arch})")
    params, x0 = make_params(torch, S, B, D, H, device, dtype)

    def run(use_baracuda, timed=False):
        p, x = leaf_copies(params, x0)
        if gpu:    # CUDA events around the step: the GPU's time, the host's launches included
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        loss = block(bt if use_baracuda else torch, x, p, H, use_baracuda)
        loss.backward()
        if gpu:
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end)
        else:
            ms = (time.perf_counter() - t0) * 1e3
        return loss.detach(), {"x": x.grad, **{k: p[k].grad for k in LEAVES}}, ms

    with bt.record(check=True) as log:
        loss, grads, _ = run(True)
    ref_loss, ref_grads, _ = run(False)

    print(f"\n{'pass':4s} {'op':14s} {'ms':>8s} {'rel err':>9s}  sku")
    for r in log:
        err = "" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
        print(f"{r['kind']:4s} {r['op']:14s} {r['ms']:8.3f} {err:>9s}  {r['sku'][:150]}")
    tol = {torch.float64: 1e-9, torch.float32: 2e-4, torch.bfloat16: 5e-2, torch.float16: 2e-2}[dtype]
    ok = True

    def rel(a, b):
        return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()

    print(f"\nloss: baracuda {loss.item():.6f}  pytorch {ref_loss.item():.6f}  rel diff {rel(loss, ref_loss):.2e}")
    ok &= rel(loss, ref_loss) <= tol
    for k in grads:
        e = rel(grads[k], ref_grads[k])
        ok &= e <= tol
        print(f"grad {k:8s} rel diff vs pytorch {e:.2e}  {'ok' if e <= tol else 'MISMATCH'}")
    # warm timing (plans cached, kernels compiled): interleaved repetitions, median and spread
    for _ in range(3):
        run(True), run(False)
    reps = args.reps or (50 if gpu else 10)
    t_bc, t_pt = [], []
    for _ in range(reps):
        t_bc.append(run(True)[2])
        t_pt.append(run(False)[2])

    def stat(ts):
        ts = sorted(ts)
        return f"{ts[len(ts) // 2]:.2f} ms (p10-p90 {ts[len(ts) // 10]:.2f}-{ts[(9 * len(ts)) // 10]:.2f})"

    clock = "CUDA events" if gpu else "wall clock"
    print(f"\nforward+backward, median of {reps} ({clock}): baracuda {stat(t_bc)}, pytorch eager {stat(t_pt)}")
    print("demo:", "PASS" if ok else "FAIL", f"(tolerance {tol:g} relative, {args.dtype})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
