"""Unchanged real model code under ``baracuda.torch.mode()``: tiny random-weight configurations of transformers'
Llama, GPT-2, BERT, ViT, Qwen2 (grouped-query attention), T5 and Bart (encoder-decoder), ResNet (a CNN: transformers'
own, and torchvision's resnet18 where torchvision loads: it is not in the test extra, as the package index here
has only CUDA builds of it, which cannot load against the CPU build of torch), one training step (forward with the model's loss, backward) and one inference
forward each, against the same step in eager torch.

No downloads: every configuration is written here and the weights are random (a fixed seed).  Each model runs in
``eval()``: dropout is then the identity, so eager and the mode compute the same function (dropout draws from
torch's RNG, and baracuda has no dropout of its own); autograd is unaffected.  The CNNs run in ``train()`` (batch
norm on batch statistics, running statistics updated: those buffers are compared too).

Tolerances (float32): ``rtol=1e-5`` (the issue's bar) with ``atol = 1e-6 * scale`` where ``scale`` is the largest
magnitude among that model's logits (for logits and loss) or among all its parameter gradients (for gradients).
An element whose exact value is (near) zero is a sum of terms up to ``scale`` that cancel, so both runs carry an
absolute rounding error of a few float32 epsilons (1.2e-7) times ``scale`` there, with no relative agreement to
expect: the key projection's bias gets an exactly-zero gradient in exact arithmetic (softmax ignores a per-query
constant), and both runs return rounding noise of about 1e-13 for it.

The coverage report of each step names only real gaps: what falls through must be in ``GAPS`` (the ops
baracuda has no drop-in for: embedding lookups, gather and indexing with a tensor, convolution, pooling, masked_fill) -- conversions and copies
(``to``, ``float``, ``contiguous``, ``clone``, ``new_zeros``) are native -- and every routed call must run in
baracuda (a routed call handed back to torch is a failure here, with its reason).
"""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

import baracuda.torch as bt  # noqa: E402

V, S, B = 100, 12, 2   # vocabulary, sequence, batch
# computing torch calls baracuda has no drop-in for (what the tiny models may fall through on)
GAPS = {"torch.nn.functional.embedding", "torch.gather",
        "Tensor.__getitem__",   # indexing with a tensor (a gather)
        "Tensor.masked_fill_", "torch.conv2d", "torch.max_pool2d", "torch.nn.functional.max_pool2d",
        "torch.nn.functional.adaptive_avg_pool2d", "torch._C._nn.adaptive_avg_pool2d", "torch.adaptive_avg_pool2d"}


def _ids(gen, shape=(B, S)):
    return torch.randint(1, V, shape, generator=gen)


def _decoder(cls, config_cls, **kw):
    """A causal LM with Llama-style attributes (Llama, Qwen2, ...): 2 layers, hidden 32, 4 heads."""
    cfg = config_cls(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, max_position_embeddings=64, **kw)
    return cls(cfg), lambda g: dict(input_ids=(ids := _ids(g)), labels=ids)


def llama():
    return _decoder(tf.LlamaForCausalLM, tf.LlamaConfig, num_key_value_heads=4)


def qwen2():   # grouped-query attention: 4 query heads share 2 key/value heads
    return _decoder(tf.Qwen2ForCausalLM, tf.Qwen2Config, num_key_value_heads=2)


def gpt2():
    cfg = tf.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0)
    return tf.GPT2LMHeadModel(cfg), lambda g: dict(input_ids=(ids := _ids(g)), labels=ids)


def bert():
    cfg = tf.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, num_labels=3)

    def inputs(g):
        ids = _ids(g)
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0   # padding on the second sequence: the attention mask is used
        return dict(input_ids=ids, attention_mask=mask, labels=torch.randint(0, 3, (B,), generator=g))
    return tf.BertForSequenceClassification(cfg), inputs


def vit():
    cfg = tf.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64, num_labels=5)
    return tf.ViTForImageClassification(cfg), lambda g: dict(
        pixel_values=torch.randn(B, 3, 16, 16, generator=g), labels=torch.randint(0, 5, (B,), generator=g))


def t5():
    cfg = tf.T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      decoder_start_token_id=0, pad_token_id=0)
    return tf.T5ForConditionalGeneration(cfg), lambda g: dict(input_ids=_ids(g), labels=_ids(g, (B, S - 3)))


def bart():
    cfg = tf.BartConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    return tf.BartForConditionalGeneration(cfg), lambda g: dict(input_ids=_ids(g), labels=_ids(g, (B, S - 3)))


def resnet():   # transformers' ResNet (conv, batch norm, ReLU, max pool, residuals, adaptive average pool)
    cfg = tf.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                          layer_type="basic", num_labels=10)
    return tf.ResNetForImageClassification(cfg), lambda g: dict(
        pixel_values=torch.randn(B, 3, 32, 32, generator=g), labels=torch.randint(0, 10, (B,), generator=g))


class _TorchvisionClassifier(torch.nn.Module):
    """torchvision's resnet18 (its code unchanged) with the cross-entropy loss HF models compute themselves."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, pixel_values, labels=None):
        logits = self.net(pixel_values)
        loss = None if labels is None else torch.nn.functional.cross_entropy(logits, labels)
        return type("Output", (), {"loss": loss, "logits": logits})()


def resnet18():
    try:   # (an environment where torchvision is not installed, or is a build for another torch, cannot load it)
        import torchvision
    except (ImportError, RuntimeError, OSError) as e:
        pytest.skip(f"torchvision does not import here: {type(e).__name__}: {e}")
    net = _TorchvisionClassifier(torchvision.models.resnet18(num_classes=10))
    net.config = type("Config", (), {"is_encoder_decoder": False})()
    # 64x64: resnet18 downsamples 32x, so its last stage sees 2x2 maps; at 32x32 it sees 1x1, and its training-mode
    # batch norm normalizes 2 values per channel (x -> +-d / sqrt(d^2 + eps)), which amplifies float32 rounding
    # differences of earlier layers a thousandfold -- there eager's own error against float64 is 3e-4
    return net, lambda g: dict(pixel_values=torch.randn(B, 3, 64, 64, generator=g),
                               labels=torch.randint(0, 10, (B,), generator=g))


MODELS = {"llama": llama, "gpt2": gpt2, "bert": bert, "vit": vit, "qwen2": qwen2, "t5": t5, "bart": bart,
          "resnet": resnet, "resnet18": resnet18}
CNNS = {"resnet", "resnet18"}
# judged against a float64 eager run (ours within 2x eager's own error): resnet18's training-mode batch norm over 8
# values per channel in its last stage amplifies float32 rounding, so eager's gradients are themselves ~1e-5 off
# float64 there, and the two float32 runs cannot agree to 1e-5 (measured: ours within 1.4x eager's error everywhere)
F64_JUDGED = {"resnet18"}


def _step(model, inputs, train):
    """The loss, the logits and every parameter's gradient (a training step), or the logits (inference)."""
    if not train:
        kw = {k: v for k, v in inputs.items() if k != "labels"}
        if model.config.is_encoder_decoder:
            kw["decoder_input_ids"] = inputs["labels"]
        with torch.no_grad():
            return None, model(**kw).logits, {}
    out = model(**inputs)
    out.loss.backward()
    return out.loss.detach(), out.logits.detach(), {n: p.grad for n, p in model.named_parameters()}


def _close(got, want, scale, what):
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6 * scale, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("train", [True, False], ids=["train", "infer"])
@pytest.mark.parametrize("name", list(MODELS))
def test_model_under_mode_matches_eager(name, train):
    torch.manual_seed(0)
    model, make_inputs = MODELS[name]()
    model = model.float().train(name in CNNS)
    inputs = make_inputs(torch.Generator().manual_seed(1))
    ours = copy.deepcopy(model)
    ref = copy.deepcopy(model).double() if name in F64_JUDGED else None   # (before the step updates model)
    want_loss, want_logits, want_grads = _step(model, inputs, train)
    with bt.mode(coverage=True) as m:
        loss, logits, grads = _step(ours, inputs, train)
    if name in F64_JUDGED:
        exact = _step(ref, {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}, train)
        _within_twice_eager((loss, logits, grads), (want_loss, want_logits, want_grads), exact)
        _check_report(m)
        return
    scale = want_logits.abs().max().item()
    _close(logits, want_logits, scale, "logits")
    if train:
        _close(loss, want_loss, scale, "loss")
        gscale = max(g.abs().max().item() for g in want_grads.values() if g is not None)
        for n, g in want_grads.items():
            assert (grads[n] is None) == (g is None), n
            if g is not None:
                _close(grads[n], g, gscale, f"gradient of {n}")
    for (n, b), (_, ob) in zip(model.named_buffers(), ours.named_buffers()):
        if b.is_floating_point():
            _close(ob, b, b.abs().max().item(), f"buffer {n}")
    _check_report(m)


def _within_twice_eager(ours, eager, exact):
    """Every result's largest error against float64 is at most twice eager's (plus 1e-7 of its scale, for errors
    that are exactly zero in both)."""
    (loss, logits, grads), (e_loss, e_logits, e_grads), (x_loss, x_logits, x_grads) = ours, eager, exact
    pairs = [("logits", logits, e_logits, x_logits)] + ([("loss", loss, e_loss, x_loss)] if loss is not None else [])
    pairs += [(f"gradient of {n}", grads[n], e_grads[n], x_grads[n]) for n in e_grads if e_grads[n] is not None]
    for what, o, e, x in pairs:
        err, e_err = (o.double() - x).abs().max().item(), (e.double() - x).abs().max().item()
        assert err <= 2 * e_err + 1e-7 * x.abs().max().item(), f"{what}: error {err:.3g} vs eager's {e_err:.3g}"


def _check_report(m):
    assert sum(m.routed.values()) > 0, m.summary()
    gaps = set(m.fell_through) - GAPS
    assert not gaps, f"{sorted(gaps)} fell through but is not a known gap:\n{m.summary()}"
    refused = {n: m.reasons[n] for n in m.fell_through if m.reasons[n] != "no baracuda drop-in"
               and not m.reasons[n].startswith("no baracuda drop-in for this in-place")}
    assert not refused, f"routed calls handed back to torch: {refused}\n{m.summary()}"


def _strides(t):
    """The strides that matter (a size-1 dim's stride is arbitrary)."""
    return tuple(st for st, n in zip(t.stride(), t.shape) if n > 1)


def test_channels_last_cnn_under_mode_matches_eager_with_its_layout():
    """transformers' ResNet made channels-last (weights and images), a training step under the mode: loss, logits,
    every gradient and the running statistics as eager's, the gradients in eager's memory order."""
    torch.manual_seed(0)
    model, make_inputs = resnet()
    model = model.float().train().to(memory_format=torch.channels_last)
    inputs = make_inputs(torch.Generator().manual_seed(1))
    inputs["pixel_values"] = inputs["pixel_values"].to(memory_format=torch.channels_last)
    ours = copy.deepcopy(model)
    want_loss, want_logits, want_grads = _step(model, inputs, True)
    with bt.mode(coverage=True) as m:
        loss, logits, grads = _step(ours, inputs, True)
    scale = want_logits.abs().max().item()
    _close(logits, want_logits, scale, "logits")
    _close(loss, want_loss, scale, "loss")
    gscale = max(g.abs().max().item() for g in want_grads.values() if g is not None)
    for n, g in want_grads.items():
        _close(grads[n], g, gscale, f"gradient of {n}")
        assert _strides(grads[n]) == _strides(g), (n, grads[n].stride(), g.stride())
    for (n, b), (_, ob) in zip(model.named_buffers(), ours.named_buffers()):
        if b.is_floating_point():
            _close(ob, b, b.abs().max().item(), f"buffer {n}")
    _check_report(m)
