"""A plan given its outputs and workspace allocates nothing and runs inside a CUDA graph capture."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("CUDA graph capture needs a GPU", allow_module_level=True)

import baracuda as bc  # noqa: E402


def _graph_roundtrip(desc, make_inputs):
    plan = bc.Plan.select(desc, "cuda")
    xs = make_inputs()
    outs = [torch.empty(t.shape, dtype=t.dtype.torch, device="cuda") for t in desc.outputs]
    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
    plan.run(*xs, out=outs, workspace=ws)          # warm-up: compiles the kernel outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        plan.run(*xs, out=outs, workspace=ws)
    new = make_inputs()
    for x, n in zip(xs, new):
        x.copy_(n)
    g.replay()
    torch.cuda.synchronize()
    want = plan.run(*new)
    want = want if isinstance(want, tuple) else (want,)
    for o, w in zip(outs, want):
        torch.testing.assert_close(o, w)
    return plan


def test_elementwise_plan_in_cuda_graph():
    d = bc.Descriptor.make("add", ((1024, 256), "bf16"), ((256,), "bf16"))
    _graph_roundtrip(d, lambda: [torch.randn(1024, 256, device="cuda", dtype=torch.bfloat16),
                                 torch.randn(256, device="cuda", dtype=torch.bfloat16)])


@pytest.mark.parametrize("op,attrs", [("softmax", {"dim": -1}), ("sum", {"dims": (1,), "keepdim": False})])
def test_row_ops_in_cuda_graph(op, attrs):
    try:
        d = bc.Descriptor.make(op, ((512, 1000), "f32"), **attrs)
    except bc.UnsupportedError as e:
        pytest.fail(f"{op} missing: {e}")
    _graph_roundtrip(d, lambda: [torch.randn(512, 1000, device="cuda")])


def test_linear_plan_in_cuda_graph():
    d = bc.Descriptor.make("mm", ((256, 128), "bf16"), ((128, 64), "bf16"))
    _graph_roundtrip(d, lambda: [torch.randn(256, 128, device="cuda", dtype=torch.bfloat16),
                                 torch.randn(128, 64, device="cuda", dtype=torch.bfloat16)])


# -- every GPU plan: capturable (no host-to-device copies, no host syncs, no allocation behind the caller) --
# Ops that read a validation flag back to the host (bad targets raise instead of reading out of bounds; see the
# README) skip that check while a capture is running, so they are captured like the others.
def _gpu_cases():
    import numpy as np

    from baracuda._core.device import Device
    from baracuda._core.sku import Backend
    from baracuda.testing import backends_for

    dev = Device("cuda", 0)
    for spec in sorted(bc.all_specs(), key=lambda s: s.name):
        for backend in backends_for(spec.name, dev):
            if backend != Backend.REFERENCE:
                yield pytest.param(spec, backend, id=f"{spec.name}-{backend}")


@pytest.mark.parametrize("spec,backend", list(_gpu_cases()))
def test_every_gpu_plan_captures(spec, backend):
    import numpy as np

    from baracuda._core.device import Device
    from baracuda._core.tensors import to_torch
    from baracuda.testing import cast, draw_samples, forced_plan

    dt = next((d for d in spec.dtypes if d.is_floating and d.itemsize == 4), spec.dtypes[0])
    samples = [s for s in draw_samples(spec) if all(np.asarray(x).size for x in s.inputs)]
    plan = None
    for s in samples:
        arrays = [cast(x, dt if np.asarray(x).dtype.kind == "f" else bc.as_dtype(np.asarray(x).dtype))
                  for x in s.inputs]
        desc = bc.Descriptor.like(spec.name, *arrays, **s.attrs)
        plan = forced_plan(desc, Device("cuda", 0), backend)
        if not isinstance(plan, str):
            break
    if plan is None or isinstance(plan, str):
        pytest.skip(f"no sample this backend runs ({plan})")
    xs = [to_torch(a).to("cuda") for a in arrays]
    outs = [torch.empty(t.shape, dtype=t.dtype.torch, device="cuda") for t in desc.outputs]
    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
    plan.run(*xs, out=outs, workspace=ws)
    torch.cuda.synchronize()
    want = [o.clone() for o in outs]
    for o in outs:
        o.zero_() if not o.dtype.is_floating_point else o.fill_(float("nan"))
    g = torch.cuda.CUDAGraph()
    if not plan.capturable:   # reads device data on the host: a clear refusal under capture, not a CUDA error
        with pytest.raises(bc.UnsupportedError, match=f"{spec.name}.*CUDA-graph capture"):
            with torch.cuda.graph(g):
                plan.run(*xs, out=outs, workspace=ws)
        return
    with torch.cuda.graph(g):
        plan.run(*xs, out=outs, workspace=ws)
    g.replay()
    torch.cuda.synchronize()
    if plan.precision.deterministic and not spec.values_unspecified:     # (empty: uninitialized, nothing written)
        for o, w in zip(outs, want):
            torch.testing.assert_close(o, w, equal_nan=True, rtol=0, atol=0)
