"""The bound-launch hot path (backends/triton/_lib/launch.py) against Triton's normal path: same results for
every alignment pattern, across reuse, other streams and CUDA-graph capture (GPU only)."""
import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

import baracuda as bc  # noqa: E402
from baracuda._core.options import PlanPreference  # noqa: E402

TRITON = PlanPreference(prefer=("triton",))


@pytest.mark.parametrize("op", ["add", "mul", "exp", "where"])
def test_bound_launch_alignments(op):
    n = 1000
    spec_in = {"add": 2, "mul": 2, "exp": 1, "where": 3}[op]
    dts = ["bool", "f32", "f32"] if op == "where" else ["f32"] * spec_in
    desc = bc.Descriptor.make(op, *[((n,), d) for d in dts])
    plan = bc.Plan.select(desc, "cuda", TRITON)
    assert plan.impl.backend.value == "triton"
    ref_plan = bc.Plan.select(desc, "cpu")
    g = torch.Generator(device="cuda").manual_seed(0)
    base = [torch.randn(n + 8, device="cuda", generator=g) for _ in dts]
    base = [b > 0 if d == "bool" else b for b, d in zip(base, dts)]
    # offsets 0 (16-byte aligned) and 1, 3 (4-byte aligned only): each pattern a different compiled variant
    for offsets in [(0, 0, 0), (1, 0, 0), (0, 3, 1), (0, 0, 0), (1, 0, 0)]:
        xs = [b[o:o + n] for b, o in zip(base, offsets)]
        for _ in range(3):  # first call: normal path; then the direct launch
            got = plan.run(*xs)
        want = ref_plan.run(*[x.cpu().numpy() for x in xs])
        torch.testing.assert_close(got.cpu(), torch.from_numpy(want), rtol=1e-5, atol=1e-6)


def test_bound_launch_streams_and_graph():
    n = 4096
    desc = bc.Descriptor.make("add", ((n,), "f32"), ((n,), "f32"))
    plan = bc.Plan.select(desc, "cuda", TRITON)
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    plan.run(a, b)
    plan.run(a, b)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):   # the hot path launches on the current stream
        out = plan.run(a, b)
    s.synchronize()
    torch.testing.assert_close(out, a + b)
    graph = torch.cuda.CUDAGraph()
    static = torch.empty_like(a)
    with torch.cuda.graph(graph):
        static.copy_(plan.run(a, b))
    a.add_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(static, a + b)
