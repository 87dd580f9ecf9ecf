"""``bt.patch(model)``: swap a Hugging Face model's pieces for fused baracuda ops; ``bt.unpatch(model)`` undoes it.

Families (recognised by class name, then checked structurally; anything else is left alone and reported):

- Llama / Mistral / Qwen2 / Gemma / Gemma2 (``<Family>RMSNorm``, ``<Family>MLP``, ``<Family>Attention``,
  ``<Family>DecoderLayer``, ``<Family>ForCausalLM``):
  * RMSNorm -> :class:`RMSNorm`: the ``rms_norm`` op (one pass; HF runs pow, mean, rsqrt, two muls and casts).
    Same parameter (the very ``weight`` Parameter object, so optimizers and tied references stay valid), same eps.
    Gemma's norm scales by ``1 + weight``: the op's weight is ``weight + 1`` made per call (one [H] add, identity
    gradient).  HF forms ``1 + weight`` in f32; here it is in the model's dtype (the op takes one dtype), so a
    bf16 Gemma's scale is rounded to bf16 before the multiply (f32 / f64 models: the same numbers).
  * Decoder layer: an instance forward (same arguments as HF's, checked by name at patch time; the deprecated
    ``past_key_values`` spelling runs HF's forward) in which the residual add and the RMSNorm after it are one
    ``add_rms_norm`` op: ``h + attn(...)`` -> post_attention_layernorm (Gemma2: ``h + post_attention_layernorm(
    attn(...))`` -> pre_feedforward_layernorm).  The MLP's residual add is not fused with the next layer's
    input_layernorm: that needs the layer to hand an unfinished sum across HF's layer loop (whose hooks record
    each layer's output), not a per-layer change.
  * MLP with a SiLU (GeLU-tanh: Gemma, ``gelu_mul``) activation -> :class:`GatedMLP`: the same gate/up/down Linear submodules (same state_dict keys);
    gate and up run as themselves (no weight copy), then the fused ``silu_mul`` op (silu(gate) * up in one pass;
    its backward is one fused pass for gate and the forward op on (gate, g) for up).
  * RoPE: the modeling module's ``apply_rotary_pos_emb`` (looked up by the attention forward as a module global,
    so there is no per-instance hook) is replaced by a dispatcher for as long as one patched model uses that
    module, and the *patched attention instances'* forwards set a context variable while they run: only they take
    the ``rope`` op (layout bhsd, half-split pairs, tables ``cos[..., :D/2]``: HF's tables repeat their halves);
    every other caller, and any call whose arguments the op does not take, runs HF's original.  Scope: the
    patched model's attention modules, nothing else in the process.
  * Attention itself is left as the user configured it (``config._attn_implementation``: sdpa, eager, ...), noted.
  * ``<Family>ForCausalLM`` with ``fused_loss=True``: in training mode with ``labels`` (and ``return_dict`` not
    False), the loss is ``linear_cross_entropy`` of the last hidden states and ``lm_head.weight``: HF's shift by
    one (or its ``shift_labels``), ignore_index -100 (or the given one), mean over non-ignored tokens (or the sum
    over ``num_items_in_batch`` when given), ``final_logit_softcapping`` passed as the op's softcap.  The [N, V]
    logits are never made, so the output's ``logits`` is **None** (as Liger's fused mode).  In eval mode or
    without labels the original forward runs and returns logits.  HF computes its loss from ``logits.float()``
    (f32 even for an f64 model); ours is computed in the model's dtype with f32 statistics and returned as f32
    (f64 for an f64 model).
- GPT-2 (``GPT2LMHeadModel`` / ``GPT2Model``): ``nn.LayerNorm`` -> :class:`LayerNorm` (``layer_norm`` op, same
  weight / bias Parameters); the MLP's ``gelu_new`` -> :class:`GeluTanh` (baracuda's gelu, approximate='tanh');
  the LM head + loss as above.

Everything a swap installs remembers what it replaced; ``unpatch`` puts the original module objects and
functions back (the originals never stopped holding the same Parameters, so nothing is copied either way).
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import sys
import weakref

import torch
from torch import nn

from .._core.spec import get_spec
from ..ops.loss_ce import LCE_DEFAULTS
from ._call import call, own_calls
from ._fused import _inside, _plan_of, _run, run_if_fused


@_inside
def _run_into(plan, out, *xs):
    return plan.run(*xs, out=out)

__all__ = ["patch", "unpatch", "PatchReport", "RMSNorm", "GatedMLP", "LayerNorm", "GeluTanh", "patch_llama",
           "patch_mistral", "patch_qwen2", "patch_gemma", "patch_gemma2", "patch_gpt2"]

_GATED = ("Llama", "Mistral", "Qwen2", "Gemma", "Gemma2")   # families with RMSNorm + gated MLP + HF rotary
_NORM_OFFSET = {"Gemma": 1.0, "Gemma2": 1.0}      # their RMSNorm scales by (1 + weight)
_SILU = ("silu", "swish")
_ATTR = "_baracuda_patch"                       # the model's record of its swaps (a plain attribute)


def _op(name: str, xs, attrs: dict):
    """Op ``name`` as its drop-in runs it: the fused forward + gradient path where the spec has one and it applies
    (linear_cross_entropy under autograd, _fused.py), else the one call path (_call.py)."""
    spec = get_spec(name)
    if spec.fused_grad is not None:
        out = run_if_fused(spec, xs, attrs)
        if out is not None:
            return out[0] if isinstance(out, (tuple, list)) else out
    out = call(name, xs, attrs)
    return out[0] if isinstance(out, tuple) else out


# -- the report ----------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class PatchReport:
    """What ``patch`` did: ``swapped`` module path (or function name) -> its replacement; ``left`` path -> why it
    was left as it is."""
    model: str
    swapped: dict = dataclasses.field(default_factory=dict)
    left: dict = dataclasses.field(default_factory=dict)
    options: dict = dataclasses.field(default_factory=dict)

    @property
    def patched(self) -> bool:
        return bool(self.swapped)

    def __str__(self) -> str:
        lines = [f"baracuda.torch.patch({self.model}): " +
                 (f"{len(self.swapped)} swapped" if self.swapped else "nothing patched")]
        lines += [f"  swapped {k}: {v}" for k, v in self.swapped.items()]
        lines += [f"  left    {k or '<model>'}: {v}" for k, v in self.left.items()]
        return "\n".join(lines)


# -- replacement modules -------------------------------------------------------------------------------------------
def _keep_original(new: nn.Module, orig: nn.Module) -> nn.Module:
    new.__dict__["_baracuda_original"] = orig     # not a submodule: no state_dict keys, no second parameter walk
    return new


def _norm_eps(m):
    eps = getattr(m, "variance_epsilon", getattr(m, "eps", None))
    return float(eps) if isinstance(eps, float) else None


class RMSNorm(nn.Module):
    """``(weight + offset) * x * rsqrt(mean(x^2) + eps)`` over the last dim as one ``rms_norm`` call (offset 0:
    Llama's norm; 1: Gemma's ``1 + weight``, the scale made per call as one [H] add, whose gradient is the
    identity).  Holds the replaced module's own ``weight`` Parameter; an input whose dtype differs from the weight's
    (HF then promotes) runs the replaced module's forward."""

    def __init__(self, orig: nn.Module, offset: float = 0.0):
        super().__init__()
        self.weight = orig.weight
        self.variance_epsilon = _norm_eps(orig)
        self.offset = offset
        _keep_original(self, orig)

    def scale(self):
        return self.weight + self.offset if self.offset else self.weight

    def attrs(self, x) -> dict:
        return {"normalized_shape": (x.shape[-1],), "eps": self.variance_epsilon}

    def forward(self, x):
        if x.dtype != self.weight.dtype:
            return self._baracuda_original(x)
        return _op("rms_norm", [x, self.scale()], self.attrs(x))

    def extra_repr(self):
        off = f", scale weight + {self.offset}" if self.offset else ""
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}{off} (baracuda rms_norm)"


def _add_norm(norm: nn.Module, x, residual):
    """(residual + x, norm(residual + x)): one ``add_rms_norm`` where ``norm`` is a baracuda :class:`RMSNorm` and
    the dtypes agree (the sum is rounded to the dtype as HF's add is; + commutes bit for bit), else the two steps."""
    if isinstance(norm, RMSNorm) and x.dtype == residual.dtype == norm.weight.dtype and x.shape == residual.shape:
        return call("add_rms_norm", [x, residual, norm.scale()], norm.attrs(x))
    s = residual + x
    return s, norm(s)


# HF decoder layers whose forward is fused here, by the names of their arguments (all passed on to self_attn):
# "pre" (Llama, Mistral, Qwen2, Gemma): h + attn(in_norm(h)) feeds post_attention_layernorm -> mlp -> + residual.
# "sandwich" (Gemma2): h + post_attention_layernorm(attn(in_norm(h))) feeds pre_feedforward_layernorm -> mlp ->
# post_feedforward_layernorm -> + residual.  The residual sum and the norm after it become one add_rms_norm.
_LAYER_ARGS = {
    "pre": ("hidden_states", "attention_mask", "position_ids", "cache", "use_cache", "position_embeddings",
            "kwargs"),
    "sandwich": ("hidden_states", "position_embeddings", "attention_mask", "position_ids", "cache", "kwargs"),
}
_LAYER_NORMS = {"pre": ("input_layernorm", "post_attention_layernorm"),
                "sandwich": ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                             "post_feedforward_layernorm")}
_DEPRECATED_LAYER_KWARGS = ("past_key_values",)     # HF renames it to cache in a decorator: its own forward runs


# transformers before 5.2x names the layer's cache argument past_key_values (later: cache, the old name a deprecated
# spelling its decorator renames): either is the same argument here, passed on to self_attn under the layer's name
_CACHE_NAMES = ("cache", "past_key_values")


def _layer_kind(layer: nn.Module):
    """'pre' / 'sandwich', or a string saying why the layer's forward is left."""
    fn = inspect.unwrap(type(layer).forward)
    names = tuple(inspect.signature(fn).parameters)[1:]
    canon = tuple("cache" if n in _CACHE_NAMES else n for n in names)
    for kind, args in _LAYER_ARGS.items():
        if canon == args and all(isinstance(getattr(layer, n, None), RMSNorm) for n in _LAYER_NORMS[kind]) and \
                all(isinstance(getattr(layer, n, None), nn.Module) for n in ("self_attn", "mlp")):
            return kind
    return f"forward arguments {names} or norms not as fused here: residual adds left to HF's forward"


def _fused_layer_forward(layer: nn.Module, kind: str):
    inner = layer.forward
    sig = inspect.signature(inspect.unwrap(type(layer).forward))
    sandwich = kind == "sandwich"
    deprecated = tuple(k for k in _DEPRECATED_LAYER_KWARGS if k not in sig.parameters)

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        if any(k in kwargs for k in deprecated):
            return inner(*args, **kwargs)
        b = sig.bind(layer, *args, **kwargs)
        b.apply_defaults()
        a = dict(b.arguments)
        del a["self"]
        extra = a.pop("kwargs", {})
        residual = a.pop("hidden_states")
        h, _ = layer.self_attn(hidden_states=layer.input_layernorm(residual), **a, **extra)
        if sandwich:
            s, h = _add_norm(layer.pre_feedforward_layernorm, layer.post_attention_layernorm(h), residual)
            h = layer.post_feedforward_layernorm(layer.mlp(h))
        else:
            s, h = _add_norm(layer.post_attention_layernorm, h, residual)
            h = layer.mlp(h)
        return s + h
    return forward


class LayerNorm(nn.Module):
    """``nn.LayerNorm`` as one ``layer_norm`` call, with the replaced module's own weight / bias Parameters."""

    def __init__(self, orig: nn.LayerNorm):
        super().__init__()
        self.weight, self.bias = orig.weight, orig.bias
        self.normalized_shape, self.eps = tuple(orig.normalized_shape), float(orig.eps)
        _keep_original(self, orig)

    def forward(self, x):
        if self.weight is not None and x.dtype != self.weight.dtype:
            return self._baracuda_original(x)
        xs = [x] + [t for t in (self.weight, self.bias) if t is not None]
        if self.weight is None and self.bias is not None:
            return self._baracuda_original(x)
        return _op("layer_norm", xs, {"normalized_shape": self.normalized_shape, "eps": self.eps})

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps} (baracuda layer_norm)"


class GeluTanh(nn.Module):
    """gelu with the tanh approximation (HF's ``gelu_new`` / ``gelu_pytorch_tanh``) as baracuda's gelu."""

    def __init__(self, orig: nn.Module):
        super().__init__()
        _keep_original(self, orig)

    def forward(self, x):
        return _op("gelu", [x], {"approximate": "tanh"})


class GatedMLP(nn.Module):
    """``down(act(gate(x)) * up(x))`` with the product as one fused two-operand op (``silu_mul``; ``gelu_mul`` for
    a gelu gate).  Keeps the replaced module's gate_proj / up_proj / down_proj (same state_dict keys); each runs as
    itself (a plain Linear, an adapter, a quantized layer alike), so no [W_gate; W_up] weight is built per call."""

    def __init__(self, orig: nn.Module, op: str, attrs: dict):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = orig.gate_proj, orig.up_proj, orig.down_proj
        self.op, self.attrs = op, dict(attrs)
        _keep_original(self, orig)

    def forward(self, x):
        gate, up = self.gate_proj(x), self.up_proj(x)
        plans = _gated_plans(self, gate, up)
        y = _GatedAct.apply(gate, up, plans) if plans is not None else call(self.op, [gate, up], self.attrs)
        return self.down_proj(y)

    def extra_repr(self):
        return f"baracuda {self.op}"


def _hooked(*modules) -> bool:
    from torch.nn.modules import module as M

    return bool(M._global_forward_hooks or M._global_backward_hooks or M._global_forward_pre_hooks) or any(
        m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks for m in modules)


def _gated_plans(mlp: GatedMLP, gate, up):
    """The (forward, backward) plans of the in-place gradient path for these gate / up tensors, or None where the
    ordinary op must run: no gradient wanted, torch.compile tracing, tensor subclasses, different shapes, or hooks
    on the MLP's modules (a hook may keep gate / up, which the in-place backward overwrites)."""
    if not torch.is_grad_enabled() or torch.compiler.is_compiling() or not (gate.requires_grad and up.requires_grad):
        return None
    if type(gate) is not torch.Tensor or type(up) is not torch.Tensor or gate.shape != up.shape or \
            gate.dtype != up.dtype or not (gate.is_contiguous() and up.is_contiguous()) or \
            _hooked(mlp, mlp.gate_proj, mlp.up_proj, mlp.down_proj):
        return None
    fw = _plan_of(mlp.op, mlp.attrs, (gate, up))
    bw = _plan_of(mlp.op + "_backward", mlp.attrs, (gate, gate, up))
    return None if fw is None or bw is None else (fw, bw)


class _GatedAct(torch.autograd.Function):
    """act(gate) * up whose backward writes both gradients over the saved gate / up buffers, as Liger's SwiGLU
    does: nothing else reads them (they are the MLP's own projections, made in its forward; no hooks, checked),
    so the step's peak holds no [tokens, intermediate] gradient buffers beyond the upstream one.  The order makes
    it exact: d_gate = <act>_mul_backward(g, gate, up) overwrites up (each element reads gate, up, g, then writes),
    then d_up = <act>_mul(gate, g) overwrites gate.  A second backward through the same graph (retain_graph)
    would read overwritten buffers: it raises instead; double backward is refused (once_differentiable)."""

    @staticmethod
    def forward(ctx, gate, up, plans):
        ctx.plans, ctx.used = plans, False
        ctx.save_for_backward(gate, up)
        return _run(plans[0], gate, up)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        if ctx.used:
            raise RuntimeError("baracuda.torch.patch: GatedMLP's backward writes its gradients over the saved "
                               "activations, so a second backward through the same graph (retain_graph=True) "
                               "cannot run; call bt.unpatch(model) for such training")
        ctx.used = True
        gate, up = ctx.saved_tensors     # (before own_calls: see its docstring)
        with own_calls():
            g = g.contiguous()
            fw, bw = ctx.plans
            _run_into(bw, up, g, gate, up)
            _run_into(fw, gate, gate, g)
        return up, gate, None


# -- per-call switches of the dispatchers -------------------------------------------------------------------------
class _Scope:
    """On during a patched module's forward: a ContextVar eagerly (per thread and task); while Dynamo traces, a
    counter instead (it cannot trace ContextVar.get / set and would break the graph at every patched module; its
    side-effect tracking replays the counter's increments, and the dispatcher's answer is baked into the graph)."""

    def __init__(self, name: str):
        self.var = contextvars.ContextVar(name, default=False)
        self.depth = 0

    def on(self) -> bool:
        if torch.compiler.is_compiling():
            return self.depth > 0
        return self.var.get()


# -- RoPE: the modeling module's apply_rotary_pos_emb, dispatched per patched attention instance -------------------
_ROPE_ON = _Scope("baracuda_patch_rope")


def _rope_fits(q, k, cos, sin, unsqueeze_dim) -> bool:
    d = q.shape[-1]
    return (unsqueeze_dim == 1 and q.ndim == 4 and k.ndim == 4 and k.shape[-1] == d and d % 2 == 0
            and cos.ndim == 3 and cos.shape == sin.shape and cos.shape[-1] == d and cos.shape[1] == q.shape[2]
            and q.dtype == k.dtype and cos.dtype in (q.dtype, torch.float32) and sin.dtype == cos.dtype
            and cos.device == q.device)


def _rope_like(x, c, s):
    """``rope`` of a [B, H, S, D] x, the result in x's memory order: HF's q / k are [B, S, H, D] projections viewed
    transposed, and a result in that order keeps attention's output in it too (cuDNN's attention writes in q's
    order), so HF's ``attn_output.transpose(1, 2).contiguous()`` copies nothing, as with Liger's in-place RoPE."""
    if x.transpose(1, 2).is_contiguous():
        return call("rope", [x.transpose(1, 2), c, s], {"layout": "bshd"}).transpose(1, 2)
    return call("rope", [x, c, s], {"layout": "bhsd"})


def _rope_dispatcher(original):
    @functools.wraps(original)
    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        if not _ROPE_ON.on() or not _rope_fits(q, k, cos, sin, unsqueeze_dim):
            return original(q, k, cos, sin, unsqueeze_dim)
        half = cos.shape[-1] // 2
        c, s = cos[..., :half], sin[..., :half]       # HF's tables are cat(freqs, freqs): the halves are equal
        return _rope_like(q, c, s), _rope_like(k, c, s)
    apply_rotary_pos_emb.__baracuda_original__ = original
    return apply_rotary_pos_emb


_INSTALLED: dict = {}    # (module name, function name) -> [original function, number of patched models using it]


def _install(modname: str, fname: str, dispatcher):
    """Replace ``modname.fname`` by ``dispatcher(original)`` while any patched model uses it; returns the undo."""
    mod = sys.modules[modname]
    key = (modname, fname)
    if key not in _INSTALLED:
        original = getattr(mod, fname)
        _INSTALLED[key] = [original, 0]
        setattr(mod, fname, dispatcher(original))
    _INSTALLED[key][1] += 1

    def undo():
        entry = _INSTALLED[key]
        entry[1] -= 1
        if entry[1] == 0:
            setattr(mod, fname, entry[0])
            del _INSTALLED[key]
    return undo


def _set_forward(module: nn.Module, forward):
    """Give ``module`` an instance-level forward; returns the undo."""
    had = "forward" in module.__dict__
    prev = module.__dict__.get("forward")
    module.forward = forward

    def undo():
        if had:
            module.forward = prev
        else:
            del module.forward
    return undo


def _scoped_forward(module: nn.Module, scope: _Scope, when=None):
    """``module``'s forward with ``scope`` on during the call (when ``when(args, kwargs)`` says so)."""
    inner = module.forward
    var = scope.var

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        if when is not None and not when(args, kwargs):
            return inner(*args, **kwargs)
        if torch.compiler.is_compiling():
            scope.depth += 1
            try:
                return inner(*args, **kwargs)
            finally:
                scope.depth -= 1
        token = var.set(True)
        try:
            return inner(*args, **kwargs)
        finally:
            var.reset(token)
    return forward


# -- HF's packed-sequence scan: skipped where the model makes its own position ids -----------------------------------
# masking_utils.find_packed_sequence_indices(position_ids) looks for several sequences packed in one row (a position
# that does not follow its predecessor) and ends in a Python ``if tensor.all()``: a host-device sync in every
# training forward with no attention mask, which drains the GPU's queue (the Llama 4L/2048 step measured ~2.7 ms of
# GPU idle after it on the H100, session 9 run B).  When the caller passes no position_ids the model builds them as
# one arange per row (plus the cache length), which is never packed: the scan's answer is None without looking.
_OWN_POSITIONS = _Scope("baracuda_patch_own_positions")


def _packed_dispatcher(original):
    @functools.wraps(original)
    def find_packed_sequence_indices(position_ids, *args, **kwargs):
        if _OWN_POSITIONS.on():
            return None
        return original(position_ids, *args, **kwargs)
    find_packed_sequence_indices.__baracuda_original__ = original
    return find_packed_sequence_indices


def _no_position_ids(fn):
    """``when`` for _scoped_forward: the call passes no position_ids (by keyword or position)."""
    params = list(inspect.signature(fn).parameters)
    at = params.index("position_ids") if "position_ids" in params else None

    def when(args, kwargs):
        return kwargs.get("position_ids") is None and (at is None or len(args) <= at or args[at] is None)
    return when


# -- the LM head + loss as linear_cross_entropy --------------------------------------------------------------------
def _labels_index(fn) -> int | None:
    params = list(inspect.signature(fn).parameters)
    return params.index("labels") if "labels" in params else None


def _fused_loss(model, hidden, labels, kwargs):
    head = model.get_output_embeddings()
    ignore = kwargs.get("ignore_index", -100)
    shift = kwargs.get("shift_labels")
    if shift is None:
        shift = nn.functional.pad(labels, (0, 1), value=ignore)[..., 1:]
    n_items = kwargs.get("num_items_in_batch")
    x = hidden.reshape(-1, hidden.shape[-1])
    xs = [x, head.weight, shift.reshape(-1).to(x.device)] + ([head.bias] if head.bias is not None else [])
    loss = _op("linear_cross_entropy", xs, dict(
        LCE_DEFAULTS, ignore_index=ignore, reduction="mean" if n_items is None else "sum",
        softcap=getattr(model.config, "final_logit_softcapping", None)))
    if loss.dtype != torch.float64:
        loss = loss.float()
    if n_items is not None:
        loss = loss / (n_items.to(loss.device) if torch.is_tensor(n_items) else n_items)
    return loss


def _lce_forward(model: nn.Module):
    inner = model.forward
    at = _labels_index(inner)

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        positional = at is not None and len(args) > at
        labels = args[at] if positional else kwargs.get("labels")
        if labels is None or not model.training or kwargs.get("return_dict") is False:
            return inner(*args, **kwargs)
        if positional:
            args = args[:at] + (None,) + args[at + 1:]
        else:
            kwargs["labels"] = None
        head = model.get_output_embeddings()
        seen = []

        def capture(h):          # the head's input: the hidden states its logits would come from
            seen.append(h)
            return h
        undo = _set_forward(head, capture)
        try:
            out = inner(*args, **kwargs)
        finally:
            undo()
        out["loss"] = _fused_loss(model, seen[-1], labels, kwargs)
        out["logits"] = None
        return out
    return forward


# -- the walk --------------------------------------------------------------------------------------------------------
def _family(cls_name: str, suffix: str) -> str | None:
    for fam in _GATED:
        if cls_name == fam + suffix:
            return fam
    return None


def _act_name(mlp) -> str:
    cfg = getattr(mlp, "config", None)
    act = getattr(cfg, "hidden_act", None) or getattr(cfg, "hidden_activation", None)
    if act is None:
        act = type(getattr(mlp, "act_fn", None)).__name__.lower()
    return str(act)


def _gated_mlp(mlp):
    """(op, attrs) for a gated MLP's activation, or a string saying why it is left."""
    if not all(isinstance(getattr(mlp, n, None), nn.Module) for n in ("gate_proj", "up_proj", "down_proj")):
        return "no gate_proj / up_proj / down_proj modules"
    act = _act_name(mlp)
    if act in _SILU or act in ("siluactivation",):
        return "silu_mul", {}
    if act in ("gelu_pytorch_tanh", "gelu_new", "gelutanh", "pytorchgelutanh", "newgeluactivation"):
        return "gelu_mul", {"approximate": "tanh"}
    return f"activation {act!r} has no fused gated op here"


def _is_causal_lm(m) -> bool:
    name = type(m).__name__
    return ((_family(name, "ForCausalLM") is not None or name == "GPT2LMHeadModel")
            and isinstance(getattr(m, "lm_head", None), nn.Linear) and hasattr(m, "config"))


class _Patcher:
    def __init__(self, model, fused_loss: bool, families):
        self.model, self.fused_loss, self.families = model, fused_loss, families
        self.report = PatchReport(type(model).__name__, options={"fused_loss": fused_loss,
                                                                 "families": tuple(families)})
        self.undo: list = []
        self.rope_modules: set = set()
        self.layers: list = []

    def swap(self, path: str, new: nn.Module, what: str):
        parent_path, _, name = path.rpartition(".")
        parent = self.model.get_submodule(parent_path)
        orig = parent._modules[name]
        parent._modules[name] = new
        self.undo.append(lambda: parent._modules.__setitem__(name, orig))
        self.report.swapped[path] = what

    def left(self, path, why):
        self.report.left[path] = why

    def visit(self, path: str, m: nn.Module, gpt2: bool):
        cls = type(m).__name__
        fam = _family(cls, "RMSNorm")
        if fam in self.families and path:
            if isinstance(getattr(m, "weight", None), nn.Parameter) and m.weight.ndim == 1 \
                    and _norm_eps(m) is not None:
                off = _NORM_OFFSET.get(fam, 0.0)
                self.swap(path, RMSNorm(m, off), "baracuda RMSNorm (rms_norm op" +
                          (f", scale weight + {off})" if off else ")"))
            else:
                self.left(path, f"{cls} without a 1-D weight and a float eps")
            return
        fam = _family(cls, "DecoderLayer")
        if fam in self.families:
            self.layers.append(path)
            return
        fam = _family(cls, "MLP")
        if fam in self.families and path:
            how = _gated_mlp(m)
            if isinstance(how, str):
                self.left(path, how)
            else:
                self.swap(path, GatedMLP(m, *how), f"baracuda GatedMLP ({how[0]} op)")
            return
        fam = _family(cls, "Attention")
        if fam in self.families:
            modname = type(m).__module__
            if not callable(getattr(sys.modules.get(modname), "apply_rotary_pos_emb", None)):
                self.left(path, f"{modname} has no apply_rotary_pos_emb to route")
                return
            if modname not in self.rope_modules:
                self.rope_modules.add(modname)
                # a patched model dropped without unpatch releases its hold on the dispatcher when collected
                fin = weakref.finalize(self.model, _install(modname, "apply_rotary_pos_emb", _rope_dispatcher))
                self.undo.append(fin)
            self.undo.append(_set_forward(m, _scoped_forward(m, _ROPE_ON)))
            self.report.swapped[path + ".apply_rotary_pos_emb"] = "baracuda rope op (bhsd, half-split), this " \
                                                                  "module's calls only"
            impl = getattr(getattr(m, "config", None), "_attn_implementation", None)
            self.left(path, f"attention kernel left as configured (attn_implementation={impl!r})")
            return
        if gpt2 and "gpt2" in self.families and path:
            if type(m) is nn.LayerNorm:
                self.swap(path, LayerNorm(m), "baracuda LayerNorm (layer_norm op)")
            elif cls in ("NewGELUActivation", "GELUTanh", "PytorchGELUTanh", "GELUActivation") and \
                    path.endswith(".act"):
                if cls == "GELUActivation":
                    self.left(path, "exact (erf) gelu: nothing to fuse at this module")
                else:
                    self.swap(path, GeluTanh(m), "baracuda gelu (approximate='tanh')")

    def packed_scan(self):
        """Route HF's packed-sequence scan through _packed_dispatcher during the base model's calls that pass no
        position_ids (the model's own arange)."""
        base = getattr(self.model, "base_model", None)
        mu = sys.modules.get("transformers.masking_utils")
        if not isinstance(base, nn.Module) or not callable(getattr(mu, "find_packed_sequence_indices", None)):
            return
        if "position_ids" not in inspect.signature(base.forward).parameters:
            return
        fin = weakref.finalize(self.model, _install(mu.__name__, "find_packed_sequence_indices", _packed_dispatcher))
        self.undo.append(fin)
        self.undo.append(_set_forward(base, _scoped_forward(base, _OWN_POSITIONS, _no_position_ids(base.forward))))
        path = next((n for n, m in self.model.named_modules() if m is base), "")
        self.report.swapped[(path + "." if path else "") + "packed_sequence_scan"] = (
            "HF's packed-sequence scan (a host-device sync per forward) skipped when no position_ids are passed: "
            "the model's own are one arange per row, never packed")

    def run(self):
        model = self.model
        gpt2 = type(model).__name__ in ("GPT2LMHeadModel", "GPT2Model")
        for path, m in list(model.named_modules()):
            self.visit(path, m, gpt2)
        for path in self.layers:        # after the walk: their norms are baracuda's now
            layer = model.get_submodule(path)
            kind = _layer_kind(layer)
            if kind in _LAYER_ARGS:
                self.undo.append(_set_forward(layer, _fused_layer_forward(layer, kind)))
                self.report.swapped[path + ".residual_add"] = "residual add + following RMSNorm as one " \
                                                              "add_rms_norm op"
            else:
                self.left(path, kind)
        fam_ok = (_family(type(model).__name__, "ForCausalLM") in self.families
                  or (gpt2 and "gpt2" in self.families))
        if self.report.swapped:
            self.packed_scan()
        if _is_causal_lm(model) and fam_ok:
            if self.fused_loss:
                self.undo.append(_set_forward(model, _lce_forward(model)))
                self.report.swapped["lm_head + loss"] = ("baracuda linear_cross_entropy in training mode with "
                                                         "labels (output.logits is None then)")
            else:
                self.left("lm_head", "fused_loss=False: logits and HF's loss_function")
        if not self.report.swapped:
            self.left("", "no module of a known family (Llama, Mistral, Qwen2, Gemma, Gemma2, GPT-2): "
                          "nothing patched")
        return self.report


_ALL = _GATED + ("gpt2",)


def patch(model: nn.Module, *, fused_loss: bool = True, families=_ALL) -> PatchReport:
    """Swap ``model``'s known pieces for fused baracuda ops in place; returns the :class:`PatchReport`.
    Patching a patched model with the same options returns its report; other options raise (unpatch first)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"baracuda.torch.patch: expected a torch.nn.Module, got {type(model).__name__}")
    families = tuple(families)
    bad = [f for f in families if f not in _ALL]
    if bad:
        raise ValueError(f"baracuda.torch.patch: argument 'families': expected names from {_ALL}, got {bad}")
    prev = model.__dict__.get(_ATTR)
    if prev is not None:
        report = prev[1]
        if report.options != {"fused_loss": fused_loss, "families": families}:
            raise RuntimeError(f"baracuda.torch.patch: {type(model).__name__} is already patched with "
                               f"{report.options}; call baracuda.torch.unpatch(model) first")
        return report
    p = _Patcher(model, fused_loss, families)
    try:
        report = p.run()
    except BaseException:
        for undo in reversed(p.undo):
            undo()
        raise
    model.__dict__[_ATTR] = (p.undo, report)
    return report


def unpatch(model: nn.Module) -> bool:
    """Put back every module and function ``patch`` replaced; returns whether the model was patched."""
    rec = model.__dict__.pop(_ATTR, None)
    if rec is None:
        return False
    for undo in reversed(rec[0]):
        undo()
    return True


def _entry(family):
    def entry(model: nn.Module, *, fused_loss: bool = True) -> PatchReport:
        return patch(model, fused_loss=fused_loss, families=(family,))
    entry.__name__ = entry.__qualname__ = f"patch_{family.lower()}"
    entry.__doc__ = f"``patch(model, families=({family!r},))``: the {family} family's swaps only."
    return entry


patch_llama, patch_mistral, patch_qwen2, patch_gemma, patch_gemma2, patch_gpt2 = (
    _entry(f) for f in ("Llama", "Mistral", "Qwen2", "Gemma", "Gemma2", "gpt2"))
