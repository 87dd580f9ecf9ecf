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
