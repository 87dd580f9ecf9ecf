"""HF transformers models with ``attn_implementation="sdpa"`` under ``bt.mode()``: their
``F.scaled_dot_product_attention`` calls route to baracuda's ``sdpa`` (the mode's report counts them), and the loss
and every parameter gradient match eager torch.  Tiny configurations (2 layers, GQA 4/2 for Llama), float64 on the
CPU (the reference backend: agreement to rounding) and float32 on the GPU (the Triton kernels, exact f32 dots).
Causal without padding (HF passes is_causal=True, no mask) and with left padding (HF passes a boolean mask)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import baracuda.torch as bt  # noqa: E402
from baracuda.testing.checks import TDEV as DEVICE  # noqa: E402

SDPA = "torch.nn.functional.scaled_dot_product_attention"
# float64 (CPU), attention alone swapped: the two paths differ in summation order only, ~1e-15 relative.  Under
# bt.mode() every routed op runs in baracuda, and HF computes the rope tables and the loss in float32 whatever the
# model dtype: their 1-ulp float32 differences (2^-24 ~ 6e-8) reach the float64 gradients, so 1e-6 relative.
# float32 (GPU): flash attention's online softmax vs torch's materialized one, both with f32 dots: a few 1e-6
# relative on gradients summed over batch and sequence; 1e-4 leaves headroom for the 2-layer chain.
TOL = {(torch.float64, "sdpa"): (1e-10, 1e-12), (torch.float64, "mode"): (1e-6, 1e-7),
       (torch.float32, "sdpa"): (1e-4, 1e-5), (torch.float32, "mode"): (1e-4, 1e-5)}


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(cfg)


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=61, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                  attn_implementation="sdpa", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg)


def _step(model, ids, mask):
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask, labels=ids)
    out.loss.backward()
    return out.loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("routing", ["sdpa", "mode"])
@pytest.mark.parametrize("padded", [False, True], ids=["causal", "left-padded"])
@pytest.mark.parametrize("make", [_llama, _gpt2], ids=["llama", "gpt2"])
def test_model_attention_routes_to_baracuda_and_matches_eager(make, padded, routing, monkeypatch):
    """routing='sdpa': only F.scaled_dot_product_attention is baracuda's (HF looks it up at call time), the rest
    eager; 'mode': the whole step under bt.mode(), whose report must show both layers' attention routed."""
    dtype = torch.float64 if DEVICE == "cpu" else torch.float32
    torch.manual_seed(0)
    model = make().to(device=DEVICE, dtype=dtype).train()
    ids = torch.randint(0, 61, (2, 11), device=DEVICE)
    mask = torch.ones_like(ids)
    if padded:
        mask[0, :3] = 0     # left padding: HF builds a boolean 4-d mask instead of is_causal=True
    want_loss, want = _step(model, ids, mask)
    if routing == "sdpa":
        calls = []

        def ours(*a, **k):
            calls.append(1)
            return bt.nn.functional.scaled_dot_product_attention(*a, **k)
        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", ours)
        got_loss, got = _step(model, ids, mask)
        assert len(calls) == 2
    else:
        with bt.mode() as m:
            got_loss, got = _step(model, ids, mask)
        assert m.routed[SDPA] == 2, (dict(m.routed), dict(m.fell_through), m.reasons)
    rtol, atol = TOL[dtype, routing]
    torch.testing.assert_close(got_loss, want_loss, rtol=rtol, atol=atol)
    assert got.keys() == want.keys()
    for n in want:
        torch.testing.assert_close(got[n], want[n], rtol=rtol, atol=atol, msg=n)
