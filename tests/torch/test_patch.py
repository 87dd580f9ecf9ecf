"""``bt.patch`` / ``bt.unpatch`` on tiny Hugging Face models (CPU): loss and every parameter gradient against eager,
state_dict unchanged, unpatch restores eager bit for bit, idempotence, unknown models, the RoPE scope."""
import inspect
import sys

import pytest
import torch

import baracuda.torch as bt

transformers = pytest.importorskip("transformers")

V, S, B = 100, 12, 2
# Gemma2: eager attention (its attention logit softcapping), a final logit softcap the fused loss must apply, and a
# sliding window shorter than S so both of its layer types (sliding, full) differ from plain causal attention.
_GEMMA2 = dict(attn_implementation="eager", final_logit_softcapping=5.0, attn_logit_softcapping=20.0,
               sliding_window=4, query_pre_attn_scalar=8)
_GATED = {
    "Llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "Mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "Qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "Gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 8}),
    "Gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(_GEMMA2, head_dim=8)),
}


def _gated_model(fam, dtype):
    cfg_name, cls_name, extra = _GATED[fam]
    cfg = getattr(transformers, cfg_name)(**dict(dict(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="sdpa"), **extra))
    torch.manual_seed(0)
    m = getattr(transformers, cls_name)(cfg).to(dtype).train()
    with torch.no_grad():       # norm weights away from their all-ones init, so their gradients are exercised
        for n, p in m.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
    return m


def _gpt2_model(dtype):
    cfg = transformers.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                  attn_implementation="sdpa", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).to(dtype).train()


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (B, S), generator=g)
    labels = ids.clone()
    labels[0, 3] = labels[1, 7] = -100
    return ids, labels


def _grads(m):
    return {n: p.grad.clone() for n, p in m.named_parameters()}


def _rel(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def _rms_f64(self, x):
    """HF's RMSNorm formulas without their float32 casts: Llama's ``weight * norm(x)``, Gemma's
    ``norm(x) * (1 + weight)``."""
    eps = getattr(self, "variance_epsilon", getattr(self, "eps", None))
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * (1 + self.weight) if type(self).__name__.startswith("Gemma") else self.weight * y


def _f64_reference(m, ids, labels, rmsnorm_cls=None):
    """Eager loss and gradients computed in float64 throughout: HF's RMSNorm casts to float32 and its loss upcasts
    logits with .float() (f32 for an f64 model), precision choices, not semantics; here the same formulas in f64."""
    saved = None
    if rmsnorm_cls is not None:
        saved = rmsnorm_cls.forward
        rmsnorm_cls.forward = _rms_f64
    try:
        logits = m(input_ids=ids).logits
    finally:
        if saved is not None:
            rmsnorm_cls.forward = saved
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
    loss.backward()
    g = _grads(m)
    m.zero_grad()
    return loss.detach(), g


def _check_close(m, ids, labels, ref_loss, ref_grads, tol):
    out = m(input_ids=ids, labels=labels)
    assert out.logits is None          # fused loss: the logits are never made
    out.loss.backward()
    assert abs(out.loss.item() - ref_loss.item()) <= tol * abs(ref_loss.item())
    for n, p in m.named_parameters():
        assert _rel(p.grad, ref_grads[n]) <= tol, n
    m.zero_grad()


@pytest.mark.parametrize("fam", list(_GATED))
def test_gated_family_f64_matches_eager(fam):
    m = _gated_model(fam, torch.float64)
    ids, labels = _batch()
    mod = sys.modules[type(m).__module__]
    ref_loss, ref_grads = _f64_reference(m, ids, labels, getattr(mod, f"{fam}RMSNorm"))
    report = getattr(bt, f"patch_{fam.lower()}")(m)
    kinds = {p.rsplit(".", 1)[-1] for p in report.swapped}
    assert {"input_layernorm", "post_attention_layernorm", "norm", "mlp", "apply_rotary_pos_emb",
            "lm_head + loss", "residual_add"} <= kinds, report.swapped
    assert type(m.model.layers[0].mlp).__name__ == "GatedMLP"
    if fam.startswith("Gemma"):
        assert m.model.layers[0].mlp.op == "gelu_mul" and m.model.norm.offset == 1.0
    # every op in float64 (the CPU backends compute in f64): only summation order differs
    _check_close(m, ids, labels, ref_loss, ref_grads, 1e-10)
    bt.unpatch(m)


@pytest.mark.parametrize("fam", ["Llama", "Qwen2", "Gemma"])
def test_gated_family_f32_matches_hf_eager(fam):
    m = _gated_model(fam, torch.float32)
    ids, labels = _batch()
    out = m(input_ids=ids, labels=labels)       # HF itself: f32 RMSNorm, loss from logits.float()
    out.loss.backward()
    ref_loss, ref_grads = out.loss.detach(), _grads(m)
    m.zero_grad()
    bt.patch(m)
    # f32 on both sides, the same formulas with different summation orders (rms statistics, the
    # loss's logsumexp): each rounds ~1e-7 relative; through two layers and the
    # backward, with gradients that partly cancel, a few hundred ulps of the largest element.
    _check_close(m, ids, labels, ref_loss, ref_grads, 2e-5)
    bt.unpatch(m)


def test_gpt2_f64_matches_eager():
    m = _gpt2_model(torch.float64)
    ids, labels = _batch()
    ref_loss, ref_grads = _f64_reference(m, ids, labels)     # GPT-2's LayerNorm and gelu_new stay in f64 in HF
    report = bt.patch(m)
    assert "transformer.h.0.ln_1" in report.swapped and "transformer.h.0.mlp.act" in report.swapped
    assert "transformer.ln_f" in report.swapped and "lm_head + loss" in report.swapped
    _check_close(m, ids, labels, ref_loss, ref_grads, 1e-10)
    bt.unpatch(m)


@pytest.mark.parametrize("fam", ["Llama", "Gemma2"])
def test_state_dict_kept_and_unpatch_restores_eager_bit_for_bit(fam):
    m = _gated_model(fam, torch.float32)
    ids, labels = _batch()
    before = m(input_ids=ids, labels=labels)
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    params = dict(m.named_parameters())
    types = {n: type(x) for n, x in m.named_modules()}
    mod = sys.modules[type(m).__module__]
    rope_fn = mod.apply_rotary_pos_emb
    bt.patch(m)
    after_sd = m.state_dict()
    assert list(after_sd) == list(sd)
    assert all(torch.equal(after_sd[k], v) for k, v in sd.items())
    assert all(p is params[n] for n, p in m.named_parameters())        # the same Parameter objects
    m.load_state_dict(sd)                                              # checkpoints load into the patched model
    assert bt.unpatch(m) and not bt.unpatch(m)
    assert {n: type(x) for n, x in m.named_modules()} == types
    assert mod.apply_rotary_pos_emb is rope_fn and "forward" not in m.__dict__
    assert not any("forward" in x.__dict__ for x in m.modules())          # the layers' fused forwards too
    again = m(input_ids=ids, labels=labels)
    assert torch.equal(again.logits, before.logits) and torch.equal(again.loss, before.loss)


def test_patch_twice_and_eval_mode():
    m = _gated_model("Mistral", torch.float32)
    r1 = bt.patch(m)
    assert bt.patch(m) is r1                                   # idempotent with the same options
    with pytest.raises(RuntimeError, match="already patched"):
        bt.patch(m, fused_loss=False)
    ids, labels = _batch()
    m.eval()
    out = m(input_ids=ids, labels=labels)                       # eval: the original head, logits returned
    assert out.logits.shape == (B, S, V) and out.loss is not None
    bt.unpatch(m)


def test_fused_loss_off_keeps_logits():
    m = _gated_model("Llama", torch.float32)
    report = bt.patch(m, fused_loss=False)
    assert "lm_head + loss" not in report.swapped and "lm_head" in report.left
    ids, labels = _batch()
    assert m(input_ids=ids, labels=labels).logits.shape == (B, S, V)
    bt.unpatch(m)


def test_unknown_model_reports_nothing_patched():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    report = bt.patch(m)
    assert not report.patched and "nothing patched" in str(report)
    assert type(m[1]) is torch.nn.LayerNorm        # a bare LayerNorm outside a known family is left alone
    bt.unpatch(m)


def test_rope_scoped_to_patched_attention():
    patched, plain = _gated_model("Llama", torch.float64), _gated_model("Llama", torch.float64)
    mod = sys.modules[type(plain).__module__]
    hf_rope = mod.apply_rotary_pos_emb
    ids, _ = _batch()
    ref = plain(input_ids=ids).logits
    bt.patch(patched)
    assert mod.apply_rotary_pos_emb is not mod.apply_rotary_pos_emb.__baracuda_original__
    # an unpatched model of the same class, sharing the modeling module, still runs HF's own rotary: bit for bit
    assert torch.equal(plain(input_ids=ids).logits, ref)
    bt.patch(plain)
    bt.unpatch(patched)
    assert hasattr(mod.apply_rotary_pos_emb, "__baracuda_original__")     # still used by the other patched model
    bt.unpatch(plain)
    assert mod.apply_rotary_pos_emb is hf_rope


def test_dropped_patched_model_releases_its_dispatchers():
    import gc

    mu = pytest.importorskip("transformers.masking_utils")
    m = _gated_model("Qwen2", torch.float32)
    mod = sys.modules[type(m).__module__]
    hf_rope, hf_scan = mod.apply_rotary_pos_emb, mu.find_packed_sequence_indices
    bt.patch(m)
    assert mod.apply_rotary_pos_emb is not hf_rope and mu.find_packed_sequence_indices is not hf_scan
    del m
    gc.collect()
    assert mod.apply_rotary_pos_emb is hf_rope and mu.find_packed_sequence_indices is hf_scan


def test_residual_add_fused_into_norm(monkeypatch):
    """Every decoder layer's post-attention residual add runs as add_rms_norm (Gemma2: the add before its
    pre_feedforward_layernorm); the deprecated ``past_key_values`` spelling runs HF's own layer forward, and
    inference with a cache gives HF's logits."""
    from baracuda.torch import _patch

    ran = []

    def spy(name, xs, attrs, *a):
        ran.append(name)
        return call(name, xs, attrs, *a)
    call = _patch.call
    monkeypatch.setattr(_patch, "call", spy)
    ids, labels = _batch()
    for fam in ("Llama", "Gemma2"):
        m = _gated_model(fam, torch.float64).eval()
        ref = m(input_ids=ids, use_cache=True).logits
        bt.patch(m)
        ran.clear()
        out = m(input_ids=ids, use_cache=True).logits
        assert ran.count("add_rms_norm") == 2, ran           # two layers, one fused add each
        assert _rel(out, ref) <= 1e-6, fam       # HF's norms round through f32 (see _f64_reference); ours stay f64
        layer, h = m.model.layers[0], torch.randn(B, S, 32, dtype=torch.float64)
        pe = m.model.rotary_emb(h, torch.arange(S)[None])
        ran.clear()
        hf_path = layer(h, position_embeddings=pe, past_key_values=None)
        fused = layer(h, position_embeddings=pe, cache=None)
        assert _rel(fused, hf_path) <= 1e-6
        # transformers >= 5.2x names the argument cache (past_key_values: a deprecated spelling its decorator
        # renames, run by HF's own forward: only the second call is fused); before, past_key_values is the name
        deprecated = "past_key_values" not in inspect.signature(inspect.unwrap(type(layer).forward)).parameters
        assert ran.count("add_rms_norm") == (1 if deprecated else 2), ran
        bt.unpatch(m)
        assert "forward" not in m.model.layers[0].__dict__


def test_fused_layers_under_generate_and_gradient_checkpointing():
    m = _gated_model("Llama", torch.float64)
    ids, labels = _batch()
    greedy = m.eval().generate(ids[:, :5], max_new_tokens=4, do_sample=False)
    bt.patch(m)
    assert torch.equal(m.generate(ids[:, :5], max_new_tokens=4, do_sample=False), greedy)   # cache path, f64
    m.train()
    loss = m(input_ids=ids, labels=labels).loss
    loss.backward()
    grads = _grads(m)
    m.zero_grad()
    m.gradient_checkpointing_enable()            # HF re-runs each (patched) layer forward in the backward
    again = m(input_ids=ids, labels=labels).loss
    again.backward()
    assert torch.equal(again, loss) and all(torch.equal(p.grad, grads[n]) for n, p in m.named_parameters())
    bt.unpatch(m)


def test_layer_with_past_key_values_argument_is_fused(monkeypatch):
    """transformers before 5.2x names the decoder layer's cache argument ``past_key_values`` (the GPU image's 5.17):
    such a layer's residual add is fused too, with the same numbers as its own forward."""
    from baracuda.torch import _patch

    base = transformers.models.llama.modeling_llama.LlamaDecoderLayer

    class LlamaDecoderLayer(base):           # recognised by class name, as the real one
        def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_values=None,
                    use_cache=False, position_embeddings=None, **kwargs):
            return base.forward(self, hidden_states, attention_mask=attention_mask, position_ids=position_ids,
                                cache=past_key_values, use_cache=use_cache, position_embeddings=position_embeddings,
                                **kwargs)

    ran = []
    call = _patch.call
    monkeypatch.setattr(_patch, "call", lambda name, *a: ran.append(name) or call(name, *a))
    m = _gated_model("Llama", torch.float64).eval()
    layer = m.model.layers[0]
    layer.__class__ = LlamaDecoderLayer
    h = torch.randn(B, S, 32, dtype=torch.float64)
    pe = m.model.rotary_emb(h, torch.arange(S)[None])
    ref = layer(h, position_embeddings=pe, past_key_values=None)
    report = bt.patch(m)
    assert "forward" in layer.__dict__, str(report)          # the instance forward is the fused one
    ran.clear()
    out = layer(h, position_embeddings=pe, past_key_values=None)
    assert ran.count("add_rms_norm") == 1, ran
    assert _rel(out, ref) <= 1e-6
    bt.unpatch(m)


def test_gated_mlp_gradients_written_over_saved_activations(monkeypatch):
    """The patched MLP's backward writes d_gate / d_up over its own gate / up buffers (no new [tokens, inter]
    buffers) with eager's gradients; a hook on the MLP keeps the ordinary op; retain_graph's second backward
    raises instead of reading overwritten buffers."""
    from baracuda.torch import _patch

    used = []
    apply = _patch._GatedAct.apply
    monkeypatch.setattr(_patch._GatedAct, "apply", lambda *a: used.append(1) or apply(*a))
    ids, labels = _batch()
    m = _gated_model("Llama", torch.float64)
    ref_loss, ref_grads = _f64_reference(m, ids, labels, transformers.models.llama.modeling_llama.LlamaRMSNorm)
    bt.patch(m)
    _check_close(m, ids, labels, ref_loss, ref_grads, 1e-9)
    assert len(used) == 2                                   # both layers took the in-place path
    loss = m(input_ids=ids, labels=labels).loss
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()
    m.zero_grad()
    used.clear()
    h = m.model.layers[0].mlp.up_proj.register_forward_hook(lambda mod, i, o: None)
    _check_close(m, ids, labels, ref_loss, ref_grads, 1e-9)
    assert len(used) == 1                                   # the hooked layer ran the ordinary op
    h.remove()
    bt.unpatch(m)


def test_rope_result_keeps_projection_memory_order():
    """HF's q / k are [B, S, H, D] projections viewed as [B, H, S, D]: the patched RoPE's result keeps that memory
    order (so attention's output does too and HF's transpose(1, 2).contiguous() copies nothing), with HF's values."""
    from baracuda.torch import _patch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as hf_rope

    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 5, 3, 8, generator=g, dtype=torch.float64).transpose(1, 2)      # a projection's view
    ang = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    r = _patch._rope_like(q, cos[..., :4], sin[..., :4])
    ref, _ = hf_rope(q, q, cos, sin)
    assert r.transpose(1, 2).is_contiguous() and _rel(r, ref) <= 1e-12
    qc = q.contiguous()                                     # a [B, H, S, D]-ordered q keeps its order too
    assert _patch._rope_like(qc, cos[..., :4], sin[..., :4]).is_contiguous()


@pytest.mark.parametrize("fam", ["Llama", "gpt2"])
def test_packed_scan_skipped_only_for_own_positions(fam, monkeypatch):
    """With no position_ids the model's own (one arange per row) are never packed: HF's scan, whose ``.all()`` is a
    host sync, is not run.  Positions the caller passes (packed here: two sequences in each row) are scanned as
    before, and the patched model's outputs follow the block-diagonal mask the scan finds, as eager's do."""
    mu = pytest.importorskip("transformers.masking_utils")
    original = mu.find_packed_sequence_indices
    calls = []

    def spy(position_ids, *a, **k):
        calls.append(position_ids)
        return original(position_ids, *a, **k)
    monkeypatch.setattr(mu, "find_packed_sequence_indices", spy)
    plain = _gpt2_model(torch.float64) if fam == "gpt2" else _gated_model(fam, torch.float64)
    patched = _gpt2_model(torch.float64) if fam == "gpt2" else _gated_model(fam, torch.float64)
    ids, _ = _batch()
    packed = torch.cat([torch.arange(5), torch.arange(S - 5)]).expand(B, S).clone()
    kw = dict(input_ids=ids, use_cache=False)         # training: no cache, no mask (HF scans only then)
    ref_own, ref_packed = plain(**kw).logits, plain(**kw, position_ids=packed).logits
    assert len(calls) == 2 and torch.equal(calls[1], packed)
    calls.clear()
    report = bt.patch(patched)
    assert any(k.endswith("packed_sequence_scan") for k in report.swapped), report
    assert mu.find_packed_sequence_indices.__baracuda_original__ is spy
    out_own = patched(**kw).logits
    assert calls == []                                          # own positions: not scanned
    out_packed = patched(**kw, position_ids=packed).logits
    assert len(calls) == 1 and torch.equal(calls[0], packed)    # the caller's positions: scanned
    # HF's norms round through f32 (see _f64_reference); ours stay f64
    assert _rel(out_own, ref_own) <= 1e-6 and _rel(out_packed, ref_packed) <= 1e-6
    assert not torch.allclose(ref_packed, ref_own)              # the packed mask changed the answer
    bt.unpatch(patched)
    assert mu.find_packed_sequence_indices is spy
    assert "forward" not in patched.base_model.__dict__


def test_compiled_patched_model_is_one_graph_with_the_fused_ops():
    """The dispatchers' per-call switches trace under Dynamo (a counter there, not the ContextVar it cannot trace):
    the patched Llama's training forward compiles to one graph (8 graph breaks before), with the fused RoPE, the
    norms and SwiGLU in it; at a second and third sequence length the loss and gradients match the eager patched
    model (the third reuses the dynamic graph)."""
    m = _gated_model("Llama", torch.float32).eval()
    ref = _gated_model("Llama", torch.float32).eval()
    bt.patch(m)
    bt.patch(ref)
    ids, labels = _batch()
    torch._dynamo.reset()
    ex = torch._dynamo.explain(lambda i, l: m(input_ids=i, labels=l).loss)(ids, labels)
    assert ex.graph_break_count == 0 and ex.graph_count == 1, ex.break_reasons
    ops = {n.args[0] for g in ex.graphs for n in g.graph.nodes
           if n.op == "call_function" and "baracuda" in str(n.target)}
    assert {"rope", "rms_norm", "add_rms_norm", "silu_mul"} <= ops, ops
    torch._dynamo.reset()
    f = torch.compile(lambda mm, i: mm(input_ids=i, labels=i).loss, backend="aot_eager")
    for s in (S, S + 4, S + 8):
        i = torch.randint(0, V, (B, s), generator=torch.Generator().manual_seed(s))
        m.zero_grad()
        ref.zero_grad()
        got, want = f(m, i), ref(input_ids=i, labels=i).loss
        got.backward()
        want.backward()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        for (n, p), q in zip(m.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=n)
