"""Plan and BackwardPlan: the lifecycle Descriptor -> select -> (sku, precision, workspace) -> run.

``Plan.select`` is the single validation choke point for the problem; ``run`` only checks its arguments
against the descriptor (shapes, dtypes, device, out=, workspace), converts them zero-copy to what the
backend computes on, and launches.  Nothing is allocated inside ``run`` when ``out=`` and ``workspace=``
are given (so a plan runs inside a CUDA graph capture).
"""
from __future__ import annotations

import functools

import math
from typing import Any

import numpy as np

from . import checks as _checks
from .device import Device, as_device, check_devices
from .dtypes import as_dtype
from .errors import (BufferTooSmallError, DTypeMismatchError, InvalidProblemError, UnsupportedError,
                     WorkspaceTooSmallError)
from .options import PlanPreference, current_preference
from .registry import Impl, explain, select_impl
from .sku import KernelSku
from .spec import Descriptor, TensorSpec, saved_names
from .tensors import ArrayKind, array_kind, device_text, dtype_of, kind_of, restore, to_numpy, to_torch

__all__ = ["Plan", "BackwardPlan", "plan_for"]


def _refuse_capture(op: str, run):
    """run, refusing with UnsupportedError inside a CUDA-graph capture (for ``Impl.capturable=False``: the
    implementation reads device data on the host, which a capture cannot do); capturable plans pay nothing."""
    def guarded(desc, inputs, outputs, ws):
        import torch

        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise UnsupportedError(op, "inside a CUDA-graph capture: this plan reads device data on the host "
                                   "(plan.capturable is False)")
        return run(desc, inputs, outputs, ws)
    return guarded


class Plan:
    """A selected implementation of one descriptor on one device; run it as often as you like.

    >>> import numpy as np, baracuda as bc
    >>> d = bc.Descriptor.make("add", ((2, 3), "f32"), ((3,), "f32"))
    >>> p = bc.Plan.select(d, device="cpu")
    >>> p.run(np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32))[1]
    array([1., 2., 3.], dtype=float32)
    """

    __slots__ = ("desc", "device", "pref", "impl", "sku", "precision", "workspace_size", "capturable", "_np", "_tdt",
                 "_in_shapes", "_out_specs", "_n_in", "_skip", "_torch_dev", "_out_tdt", "_run", "_fast", "_dev_text")

    def __init__(self, desc: Descriptor, device: Device, pref: PlanPreference, impl: Impl):
        self.desc, self.device, self.pref, self.impl = desc, device, pref, impl
        prec = impl.precision(desc, pref)
        aux = desc.outputs[0].dtype if desc.outputs and desc.outputs[0].dtype != desc.dtype else None
        self.sku = KernelSku(desc.spec.category, desc.op, desc.dtype, aux,
                             impl.layout(desc) if impl.layout else None,
                             impl.epilogue(desc) if impl.epilogue else None,
                             device.arch, impl.backend, impl.route_of(desc, pref), prec)
        self.precision = prec
        self.workspace_size = impl.workspace_of(desc)
        self.capturable = impl.capturable      # False: reads device data on the host (no CUDA-graph capture)
        self._run = impl.bind(desc, pref) if impl.bind is not None else impl.run
        if not impl.capturable:
            self._run = _refuse_capture(desc.op, self._run)
        self._np = impl.array_api == "numpy"
        self._n_in = len(desc.inputs)
        self._in_shapes = tuple(t.shape for t in desc.inputs)
        self._out_specs = desc.outputs
        self._skip = all(t.numel == 0 for t in desc.outputs)
        self._tdt = None
        self._out_tdt = None
        self._torch_dev = None
        self._dev_text = str(device)
        # the hot path (torch tensors of exactly the planned shapes/dtypes/device, nothing else given):
        # built lazily on the first run; see _fast_path.  A CPU plan with no operands takes the general path: its
        # outputs come back as NumPy (the CPU's array type), see _check_inputs
        self._fast = None if (not self._np and not self._skip and (desc.inputs or device.type == "cuda")) else False

    # -- selection ---------------------------------------------------------------------------
    @classmethod
    def select(cls, desc: Descriptor, device=None, pref: PlanPreference | None = None) -> "Plan":
        """Pick the best implementation of ``desc`` on ``device`` (default: the GPU if present, else CPU).

        pref: default, the preference in effect (``baracuda.preference(...)``; ``PlanPreference()`` outside one).
        Raises UnsupportedError listing every backend and why it refused.
        """
        dev = as_device(device)
        pref = pref or current_preference()
        impl = select_impl(desc, dev, pref)
        return cls(desc, dev, pref, impl)

    def explain(self):
        return explain(self.desc, self.device, self.pref)

    def backward(self) -> "BackwardPlan":
        """The backward plan of this op, on the same device and preferences."""
        return BackwardPlan.select(self.desc, self.device, self.pref)

    def __repr__(self) -> str:
        return f"Plan({self.desc}; {self.sku}; workspace={self.workspace_size}B)"

    # -- argument checks ---------------------------------------------------------------------
    def _torch_dtypes(self):
        if self._tdt is None:
            self._tdt = tuple(t.dtype.torch for t in self.desc.inputs)
            self._out_tdt = tuple(t.dtype.torch for t in self._out_specs)
            import torch

            self._torch_dev = torch.device("cpu") if self.device.type == "cpu" else torch.device("cuda", self.device.index)
        return self._tdt

    def _check_inputs(self, inputs) -> tuple[list, ArrayKind]:
        op = self.desc.op
        if len(inputs) != self._n_in:
            raise InvalidProblemError(op, "inputs", f"{self._n_in} arrays", f"{len(inputs)}")
        natives = []
        kind0 = None
        for i, x in enumerate(inputs):
            try:
                k = kind_of(x)
            except TypeError:
                k = None
            # a torch tensor of exactly the planned dtype, shape and device (the common call): nothing to name
            if k is ArrayKind.TORCH and x.dtype is self._torch_dtypes()[i] and x.device == self._torch_dev and \
                    tuple(x.shape) == self.desc.inputs[i].shape:
                a = to_numpy(x) if self._np else x.detach()
            else:       # anything else: the checks that name the argument and what was wrong
                arg = self._arg(i)
                a, k = self._native(arg, x, True)
                self._check_spec(arg, a, self.desc.inputs[i], x)
                a = a if self._np or k is not ArrayKind.TORCH else a.detach()
            if kind0 is None:
                kind0 = k
            natives.append(a)
        # no array operands (creation ops): the array type of the plan's device; callers of another kind convert
        # (the launcher and BackwardPlan's sub-ops: see launcher() and _Ctx.op)
        return natives, (kind0 or (ArrayKind.TORCH if self.device.type == "cuda" else ArrayKind.NUMPY))

    def _native(self, arg: str, x, host_copy: bool):
        """``x`` as what the backend computes on (NumPy for the reference backend, else a torch tensor) and its
        array kind, after the type and device checks: an array (ArgumentTypeError), on the plan's device
        (DeviceMismatchError; never a meta tensor).  host_copy: the reference backend may copy a device array to
        the host (inputs; an ``out=`` must be on the plan's device: a reference plan's host copy of a device ``out`` is
        written back after the run, ``_write_back``)."""
        op = self.desc.op
        k = array_kind(op, arg, x)
        dev = device_text(x, k)
        if dev != self._dev_text and not (host_copy and self._np and dev.startswith("cuda")):
            check_devices(op, (arg,), (dev,), self._dev_text, "an array")
        if self._np:
            return (x if k is ArrayKind.NUMPY else to_numpy(x)), k
        return (x if k is ArrayKind.TORCH else to_torch(x)), k

    def _check_spec(self, arg: str, a, want: TensorSpec, given=None) -> None:
        """Shape and dtype of array ``a`` (NumPy or torch) against ``want``; ``given``: the caller's array (a torch
        tensor's dtype is named as torch names it: float16)."""
        shape = tuple(a.shape)
        if shape != want.shape:
            raise InvalidProblemError(self.desc.op, arg, f"shape {want.shape}", shape)
        got = dtype_of(self.desc.op, arg, a, want.dtype)
        if got != want.dtype:     # (a torch tensor's dtype by torch's name: float16)
            given = a if given is None else given
            raise DTypeMismatchError(self.desc.op, arg, str(want.dtype), str(got) if isinstance(given, np.ndarray)
                                     else str(given.dtype).replace("torch.", ""))

    def _arg(self, i: int) -> str:
        return self.desc.spec.arg_name(i)

    def _outputs(self, out):
        specs = self._out_specs
        if out is None:
            if self._np:
                return [np.empty(t.shape, t.dtype.numpy) for t in specs], None
            import torch

            self._torch_dtypes()
            return [torch.empty(t.shape, dtype=self._out_tdt[j], device=self._torch_dev) for j, t in enumerate(specs)], None
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(specs):
            raise InvalidProblemError(self.desc.op, "out", f"{len(specs)} arrays", len(outs))
        natives = []
        for j, (o, t) in enumerate(zip(outs, specs)):
            arg = f"out[{j}]"
            a, _ = self._native(arg, o, False)
            n = math.prod(a.shape)
            if n < t.numel:
                raise BufferTooSmallError(self.desc.op, arg, t.numel, n)
            self._check_spec(arg, a, t, o)
            natives.append(a)
        return natives, outs

    def _workspace(self, workspace):
        need = self.workspace_size
        if workspace is None:
            if need == 0:
                return None
            if self._np:
                return np.empty(need, np.uint8)
            import torch

            return torch.empty(need, dtype=torch.uint8, device=self._torch_dev)
        a, _ = self._native("workspace", workspace, False)
        if isinstance(a, np.ndarray):
            got, dense = int(a.nbytes), a.flags.c_contiguous
        else:
            got, dense = a.numel() * a.element_size(), a.is_contiguous()
        if not dense:       # kernels address the workspace as one run of bytes from its start
            raise InvalidProblemError(self.desc.op, "workspace", "a contiguous buffer", "a strided view")
        if got < need:
            raise WorkspaceTooSmallError(self.desc.op, need, got)
        return a

    def can_implement(self, *inputs, out=None, workspace=None) -> bool:
        """All argument checks of ``run``, without launching anything. Raises on the first problem."""
        self._check_inputs(inputs)
        if out is not None:
            self._outputs(out)
        if workspace is not None or self.workspace_size:
            if workspace is None:
                raise WorkspaceTooSmallError(self.desc.op, self.workspace_size, 0)
            self._workspace(workspace)
        return True

    # -- run -----------------------------------------------------------------------------------
    def run(self, *inputs, out=None, workspace=None, stream=None) -> Any:
        """Run on ``inputs`` (any supported array type); returns the output(s) in the caller's type (with no array
        operands, the device's: NumPy on a CPU plan, torch tensors on a CUDA plan).

        out: preallocated output array(s) (then nothing is allocated for outputs);
        workspace: a byte buffer of at least ``workspace_size`` bytes;
        stream: a torch.cuda.Stream to launch on (default: the current stream).
        """
        if _checks.PENDING:         # an earlier call's deferred value check may have landed (see _core/checks.py)
            _checks.poll()
        if self._fast is not False and stream is None:
            res = self._fast_path(inputs, out, workspace)
            if res is not None:
                return res
        natives, kind = self._check_inputs(inputs)
        outs, given = self._outputs(out)
        ws = self._workspace(workspace)
        if not self._skip:
            if stream is not None and not self._np:
                import torch

                with torch.cuda.stream(stream):
                    self._run(self.desc, natives, outs, ws)
            else:
                self._run(self.desc, natives, outs, ws)
            if self._np and given is not None:
                _write_back(outs, given)
        if given is not None:
            res = given
        else:
            res = [restore(kind, o, self.device) for o in outs] if (self._np or kind is not ArrayKind.TORCH) else outs
        return res[0] if len(res) == 1 else tuple(res)

    __call__ = run

    def _fast_parts(self):
        """What the hot paths need, built once: (tensor type, per-input (shape, dtype), device index, per-output
        (input to allocate like, allocator), empty_like, workspace allocator)."""
        fast = self._fast
        if fast is None:
            import torch

            self._torch_dtypes()
            didx = -1 if self.device.type == "cpu" else self.device.index
            sigs = tuple(zip(tuple(torch.Size(s) for s in self._in_shapes), self._tdt))
            allocs = []
            for j, t in enumerate(self._out_specs):
                # torch.empty_like(an input of the output's shape and dtype) costs ~2 us on the GPU host,
                # torch.empty(shape, dtype=, device=) ~4.7 us (keyword parsing): bench/launch_overhead.py
                like = next((i for i, (shp, dt) in enumerate(sigs) if shp == t.shape and dt is self._out_tdt[j]),
                            None)
                allocs.append((like, functools.partial(torch.empty, torch.Size(t.shape), dtype=self._out_tdt[j],
                                                       device=self._torch_dev)))
            ws = (functools.partial(torch.empty, self.workspace_size, dtype=torch.uint8, device=self._torch_dev)
                  if self.workspace_size else None)
            allocs, empty_like = tuple(allocs), torch.empty_like

            def alloc_outs(xs):
                # (empty_like of a non-contiguous input would copy its strides: outputs are always contiguous)
                return [empty_like(xs[like]) if like is not None and xs[like].is_contiguous() else alloc()
                        for like, alloc in allocs]
            fmt = self.desc.spec.out_format_of
            if fmt is not None:
                alloc_outs = _format_following(alloc_outs, fmt, self._out_specs, self._out_tdt, self._torch_dev)
            # an implementation that returns fresh contiguous outputs itself (a library that allocates its result:
            # cuFFT's out-of-place transforms, torch's GEMM entry points) is called for them: no buffer to copy into
            produce = getattr(self._run, "produce", None) if ws is None else None
            fast = self._fast = (torch.Tensor, sigs, didx, allocs, alloc_outs, ws, produce)
        return fast

    def _fast_path(self, inputs, out=None, workspace=None):
        """Plain torch tensors matching the plan exactly (inputs, and ``out`` / ``workspace`` where given): the
        checks are a few attribute compares per operand (host overhead is what small ops pay); anything else
        returns None and takes the general path, which names what is wrong."""
        tensor_t, sigs, didx, allocs, alloc_outs, ws, produce = self._fast_parts()
        if len(inputs) != len(sigs):
            return None
        # (get_device() is -1 for a CPU and a meta tensor alike: a CPU plan, the Triton interpreter's, asks is_meta)
        host = didx < 0
        for x, (shp, dt) in zip(inputs, sigs):
            if type(x) is not tensor_t or x.dtype is not dt or x.shape != shp or x.get_device() != didx or \
                    (host and x.is_meta):
                return None
        if workspace is not None:
            if type(workspace) is not tensor_t or workspace.get_device() != didx or (host and workspace.is_meta) or \
                    workspace.numel() * workspace.element_size() < self.workspace_size or \
                    not workspace.is_contiguous():
                return None
        elif ws is not None:
            workspace = ws()
        if out is None:
            if produce is not None:
                outs = produce(inputs)
            else:
                outs = alloc_outs(inputs)
                self._run(self.desc, inputs, outs, workspace)
            return outs[0] if len(outs) == 1 else tuple(outs)
        outs = [out] if type(out) is tensor_t else list(out) if isinstance(out, (tuple, list)) else None
        if outs is None or len(outs) != len(allocs):
            return None
        for o, t, odt in zip(outs, self._out_specs, self._out_tdt):
            if type(o) is not tensor_t or o.dtype is not odt or o.shape != t.shape or o.get_device() != didx or \
                    (host and o.is_meta):
                return None
        self._run(self.desc, inputs, outs, workspace)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def launcher(self):
        """``go(xs) -> list of outputs`` for torch tensors already known to match this plan (shape, dtype and device
        of every operand: the drop-in's call key holds them, ``torch/_call.py``), so nothing is checked per call:
        the pending value-check poll, the output allocation and the launch.  Plans of the NumPy reference backend
        and plans with nothing to compute take ``run``.  The outputs are torch tensors (also with no operands)."""
        if self._fast is False:
            device = self.device

            def checked(xs):
                res = self.run(*xs)
                res = list(res) if isinstance(res, tuple) else [res]
                return res if xs else [restore(ArrayKind.TORCH, r, device) for r in res]
            return checked
        import torch

        _, _, _, allocs, alloc_outs, ws, produce = self._fast_parts()
        run, desc, checks, empty_like = self._run, self.desc, _checks, torch.empty_like
        if produce is not None:
            # the implementation returns fresh contiguous outputs itself (torch's functional GEMM entry points)
            def go(xs):
                if checks.PENDING:
                    checks.poll()
                return produce(xs)

            return go
        if len(allocs) == 1 and ws is None and allocs[0][0] is not None and self.desc.spec.out_format_of is None:
            like, alloc = allocs[0]      # one output shaped like an input (elementwise, norms, softmax): the hot case

            def go(xs):
                if checks.PENDING:
                    checks.poll()
                x = xs[like]
                outs = [empty_like(x) if x.is_contiguous() else alloc()]
                run(desc, xs, outs, None)
                return outs

            return go

        def go(xs):
            if checks.PENDING:
                checks.poll()
            outs = alloc_outs(xs)
            run(desc, xs, outs, ws() if ws is not None else None)
            return outs

        return go

    def writer(self):
        """``write(xs, outs)``: launch into the given outputs (torch tensors matching this plan, contiguous), for a
        caller that writes an op's result over one of its operands (``bt.mode()``'s in-place forms of elementwise
        ops); None for a plan that cannot: the NumPy reference backend, nothing to compute, a workspace."""
        if self._fast is False or self._skip or self._np or self.workspace_size:
            return None
        run, desc, checks = self._run, self.desc, _checks

        def write(xs, outs):
            if checks.PENDING:
                checks.poll()
            run(desc, xs, outs, None)
        return write


def _format_following(alloc_outs, i, specs, tdts, dev):
    """``alloc_outs`` whose outputs of input ``i``'s rank take its channels-last memory format when it has one (and is
    not also contiguous: torch's suggest_memory_format)."""
    import torch

    formats = {4: torch.channels_last, 5: torch.channels_last_3d}

    def alloc(xs):
        x = xs[i]
        mf = formats.get(x.dim())
        if mf is None or x.is_contiguous() or not x.is_contiguous(memory_format=mf):
            return alloc_outs(xs)
        return [torch.empty(t.shape, dtype=dt, device=dev, memory_format=mf) if len(t.shape) == x.dim()
                else torch.empty(t.shape, dtype=dt, device=dev) for t, dt in zip(specs, tdts)]
    return alloc


def _write_back(outs, given) -> None:
    """The reference backend computes on the host: an ``out=`` on a device reached it as a host copy (``_native``),
    so the result goes back into the caller's array (host arrays were written in place: NumPy views)."""
    for a, o in zip(outs, given):
        if device_text(o, kind_of(o)) != "cpu":
            to_torch(o).copy_(to_torch(a))


@functools.lru_cache(maxsize=2048)
def plan_for(desc: Descriptor, device: Device, pref: PlanPreference) -> Plan:
    """Cached ``Plan.select`` (plans are immutable, so one per (descriptor, device, preference)); bounded: the
    least recently used plan goes first.  (The torch drop-ins keep their own bound calls: torch/_call.py.)"""
    return Plan.select(desc, device, pref)


# -- backward ----------------------------------------------------------------------------------
def _torch_dtype():
    import torch

    return torch.dtype


class _AllNeeded:
    """``ctx.needs`` when every input's gradient is wanted: ``ctx.needs[i]`` is True for every i."""

    __slots__ = ()

    def __getitem__(self, i) -> bool:
        return True

    def __repr__(self) -> str:
        return "ALL_NEEDED"


ALL_NEEDED = _AllNeeded()


class _Ctx:
    """What a backward rule computes with: other baracuda ops (``ctx.op``), reshape, reduce-to.

    ``ctx.needs[i]``: whether input i's gradient is wanted (autograd's needs_input_grad); a rule may skip the work
    of a gradient nobody wants (an add's broadcast mask, a frozen weight) and return None there.

    In trace mode the arrays are TensorSpecs (selection happens once, at BackwardPlan.select);
    in run mode they are real arrays and each op runs through the plan chosen while tracing.
    """

    needs = ALL_NEEDED

    def __init__(self, bwp: "BackwardPlan", trace: bool, grads=(), tape: "_Tape | None" = None):
        self.bwp, self.trace, self._grads, self.tape = bwp, trace, grads, tape
        self.needs = bwp.needs

    def _caller_kind(self, res):
        """A sub-op without operands (``full``) returns its plan's device type; give it the gradients' kind."""
        g = next((g for g in self._grads if g is not None), None)
        if g is None:
            return res
        kind, dev = kind_of(g), self.bwp.device
        return tuple(restore(kind, r, dev) for r in res) if isinstance(res, tuple) else restore(kind, res, dev)

    @staticmethod
    def spec_of(x) -> TensorSpec:
        if isinstance(x, TensorSpec):
            return x
        if isinstance(getattr(x, "dtype", None), _torch_dtype()):
            return TensorSpec(tuple(x.shape), as_dtype(x.dtype))   # (backward rules ask per call: no adapter lookup)
        from .tensors import shape_dtype_device

        s, d, _ = shape_dtype_device(x)
        return TensorSpec(tuple(s), d)

    def op(self, name: str, *xs, **attrs):
        key = None
        if not self.trace:
            # run mode: the plan by (name, shapes, dtypes, attrs) without building and validating a Descriptor
            # (a backward runs several sub-ops per call; their descriptors were validated while tracing)
            try:
                key = (name, tuple([(tuple(x.shape), x.dtype) for x in xs]), tuple(sorted(attrs.items())))
                p = self.bwp._by_key.get(key)
            except TypeError:       # an unhashable attribute value: the general path
                key = p = None
            if p is not None:
                return p.run(*xs) if xs else self._caller_kind(p.run())
        desc = Descriptor(name, tuple(self.spec_of(x) for x in xs), tuple(sorted(attrs.items())))
        plans = self.bwp._plans
        p = plans.get(desc)
        if p is None:
            p = plans[desc] = Plan.select(desc, self.bwp.device, self.bwp.pref)
        if self.trace:
            outs = desc.outputs
            if self.tape is not None:
                outs = self.tape.op(p, xs, outs)
            return outs[0] if len(outs) == 1 else outs
        if key is not None:
            self.bwp._by_key[key] = p
        return p.run(*xs) if xs else self._caller_kind(p.run())

    def shape(self, x) -> tuple:
        return tuple(x.shape)

    def reshape(self, x, shape):
        shape = tuple(shape)
        if isinstance(x, TensorSpec):
            r = TensorSpec(shape, x.dtype)
            return r if self.tape is None else self.tape.reshape(x, r)
        return x.reshape(shape)

    def expand(self, x, shape):
        """``x`` broadcast to ``shape`` as a view (stride 0 along the expanded dims; no kernel), as torch's own
        gradients of ``sum`` / ``expand`` are: for a rule's *result* (a gradient handed to autograd or the
        caller); a sub-op's operand takes ``broadcast_to``, whose kernels own their layout."""
        shape = tuple(shape)
        if isinstance(x, TensorSpec):
            r = TensorSpec(shape, x.dtype)
            return r if self.tape is None else self.tape.view(x, r, _expand_view)
        return _expand_view(x, shape)

    def reduce_to(self, g, shape):
        """Sum a broadcast gradient ``g`` back to ``shape`` (the seeds' reduce-to)."""
        shape = tuple(shape)
        gshape = tuple(g.shape)
        if gshape == shape:
            return g
        lead = len(gshape) - len(shape)
        dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and gshape[lead + i] != 1)
        r = self.op("sum", g, dims=dims, keepdim=False) if dims else g
        return self.reshape(r, shape)


def _reshape_view(x, shape):
    return x.reshape(shape)


def _expand_view(x, shape):
    """A broadcast view of a torch tensor or a NumPy array (read-only: NumPy's broadcast views are)."""
    expand = getattr(x, "expand", None)
    if expand is not None:
        return expand(shape)
    import numpy as np

    return np.broadcast_to(x, shape)


class _Tape:
    """A backward rule's sub-ops, recorded while the rule is traced on specs: per step the plan and where its operands
    come from (slots: the gradients, then the saved tensors, then each step's outputs in order).  The rule's
    control flow depends only on the descriptor, ``needs`` and which gradients exist, so for a call where every
    gradient exists the steps are the rule.  A value the tape did not see (a spec the rule built itself) makes the
    tape unusable (``finish`` returns None) and the rule runs instead."""

    __slots__ = ("slot", "keep", "steps", "ok", "result", "_run")

    def __init__(self, leaves: list):
        self.slot = {id(x): i for i, x in enumerate(leaves) if x is not None}   # (None: an absent gradient)
        self.keep = list(leaves)        # (alive while tracing: ids stay unique)
        self.steps: list = []           # (plan, operand slots) or (None, slot, shape) for a reshape
        self.ok = True
        self.result = None
        self._run = None

    def _at(self, x) -> int:
        i = self.slot.get(id(x))
        if i is None:
            self.ok = False
        return i

    def _new(self, spec: TensorSpec) -> TensorSpec:
        fresh = TensorSpec(spec.shape, spec.dtype)
        self.slot[id(fresh)] = len(self.keep)
        self.keep.append(fresh)
        return fresh

    def op(self, plan: "Plan", xs, outs) -> tuple:
        self.steps.append((plan, tuple(self._at(x) for x in xs)))
        return tuple(self._new(o) for o in outs)

    def reshape(self, x, out: TensorSpec) -> TensorSpec:
        return self.view(x, out, _reshape_view)

    def view(self, x, out: TensorSpec, how) -> TensorSpec:
        """A view step: ``how(value, out.shape)`` (a reshape, an expand)."""
        self.steps.append((None, self._at(x), (how, out.shape)))
        return self._new(out)

    def finish(self, res) -> "_Tape | None":
        result = []
        for r in res:
            result.append(None if r is None else self._at(r))
        if not self.ok:
            return None
        self.result, self.slot, self.keep = tuple(result), None, None
        return self

    def run(self, grads, saved) -> tuple:
        steps = self._run
        if steps is None:   # the launchers, made on first use (a plan's launcher skips every check: the trace vouches)
            steps = self._run = [(None, p_or_none[1], p_or_none[2]) if p_or_none[0] is None
                                 else (p_or_none[0].launcher(), p_or_none[1], None) for p_or_none in self.steps]
        vals = [*grads, *saved]
        for go, ins, view in steps:
            if go is None:
                vals.append(view[0](vals[ins], view[1]))
            else:
                vals.extend(go([vals[i] for i in ins]))
        return tuple([None if i is None else vals[i] for i in self.result])


class BackwardPlan:
    """Backward of one op: gradients of the inputs from output gradients and the saved tensors.

    ``saves`` names what the caller keeps from the forward pass (input names, or "out" / "out1" …).
    The sub-plans are selected once here by tracing the op's backward rule on shapes; ``skus`` lists them.
    """

    def __init__(self, desc: Descriptor, device: Device, pref: PlanPreference, needs: tuple | None = None):
        """needs: per input, whether its gradient is wanted (default: every one); the rule may return None for the
        others (``_Ctx.needs``)."""
        spec = desc.spec
        if not spec.is_differentiable:
            raise UnsupportedError(desc.op, "has no backward (not differentiable)")
        self.desc, self.device, self.pref = desc, device, pref
        self.needs = ALL_NEEDED if needs is None or all(needs) else tuple(bool(n) for n in needs)
        self.saves = tuple(saved_names(desc))
        self._plans: dict = {}
        self._by_key: dict = {}     # run-time lookup of _plans (see _Ctx.op)
        # trace once on shapes with every output's gradient: selects every sub-plan and validates the rule against
        # the descriptor; a call where some outputs have no gradient (batch_norm's statistics) gets its own tape,
        # traced on first use
        self._tape = self._trace((True,) * len(desc.outputs))
        self._tapes = {(True,) * len(desc.outputs): self._tape}

    def _trace(self, present: tuple) -> "_Tape | None":
        """The rule traced on shapes, with a gradient for the outputs ``present`` marks (None for the others); its
        tape (None: a rule the tape cannot follow).  Fresh spec objects: the tape tells values apart by identity,
        and a saved output is its gradient's twin."""
        desc = self.desc
        grads = tuple(TensorSpec(t.shape, t.dtype) if p else None for t, p in zip(desc.outputs, present))
        saved = {n: TensorSpec(self._spec_for(n).shape, self._spec_for(n).dtype) for n in self.saves}
        tape = _Tape(list(grads) + [saved[n] for n in self.saves])
        res = desc.spec.grad(_Ctx(self, True, tape=tape), desc, grads, saved)
        for i, (r, t) in enumerate(zip(res, desc.inputs)):
            if r is not None and (tuple(r.shape) != t.shape):
                raise AssertionError(f"{desc.op} backward rule: grad {i} has shape {r.shape}, input is {t.shape}")
        self.workspace_size = max((p.workspace_size for p in self._plans.values()), default=0)
        return tape.finish(res)

    @classmethod
    def select(cls, desc: Descriptor, device=None, pref: PlanPreference | None = None) -> "BackwardPlan":
        return cls(desc, as_device(device), pref or current_preference())

    def _spec_for(self, name: str) -> TensorSpec:
        names = self.desc.spec.arg_names
        if name in names:
            return self.desc.inputs[names.index(name)]
        if name == "out":
            return self.desc.outputs[0]
        if name.startswith("out") and name[3:].isdigit():
            return self.desc.outputs[int(name[3:])]
        raise AssertionError(f"{self.desc.op}: unknown saved tensor {name!r}")

    @property
    def skus(self) -> list[KernelSku]:
        return [p.sku for p in self._plans.values()]

    @property
    def sku(self) -> KernelSku | None:
        """The SKU of the main sub-plan (the first one the rule runs); None for a rule that runs no kernel (``sum``'s
        gradient: the upstream expanded, a view)."""
        return next((p.sku for p in self._plans.values()), None)

    @property
    def precision(self):
        sku = self.sku
        return sku.precision if sku is not None else None

    def __repr__(self) -> str:
        return f"BackwardPlan({self.desc.op}; saves={self.saves}; " + "; ".join(str(s) for s in self.skus) + ")"

    def run(self, *grads, **saved):
        """grads: one per output (None for an output with no gradient); saved: by the names in ``saves``, the
        forward's inputs and outputs (softmax: ``plan.backward().run(g, out=y)`` with ``y = plan.run(x)``).

        Returns one gradient per input (None for inputs that are not differentiable).  Every argument is checked
        against the descriptor (type, shape, dtype, device: the errors name the argument); ``replay`` skips that
        for callers that pass the forward's own tensors.
        """
        self._check_args(grads, saved)
        return self.replay(grads, saved)

    def replay(self, grads, saved: dict) -> tuple:
        """``run`` without the argument checks, for a caller that passes exactly what the forward saw and returned
        (the torch drop-ins' autograd Function: autograd gives gradients of the outputs' shapes and dtypes)."""
        return tuple(self.desc.spec.grad(_Ctx(self, False, grads), self.desc, grads, saved))

    def replay_tape(self, grads, saved: list):
        """``replay`` for torch tensors (the drop-ins' autograd): the rule's sub-ops as recorded while tracing, each
        relaunched through its plan's launcher with no rule code, key or check in between (``_Tape``); ``saved`` in
        ``saves`` order.  Falls back to the rule where the trace recorded nothing (a rule the tape cannot follow)
        or the rule run on these gradients could not be traced)."""
        tape = self._tape
        for g in grads:
            if g is None:      # some outputs have no gradient: the tape traced for that pattern
                present = tuple([g is not None for g in grads])
                tape = self._tapes.get(present, False)
                if tape is False:
                    try:
                        tape = self._trace(present)
                    except Exception:   # (a rule that reads an absent gradient's spec: it runs, and says why)
                        tape = None
                    self._tapes[present] = tape
                break
        if tape is None:
            return self.replay(grads, dict(zip(self.saves, saved)))
        return tape.run(grads, saved)

    def call_text(self) -> str:
        """How to call ``run`` for this op, e.g. ``run(grad, out=<the forward's output>)``."""
        outs = self.desc.outputs
        gnames = ["grad"] if len(outs) == 1 else [f"grad{j}" for j in range(len(outs))]
        saved = [f"{n}=<the forward's {self._what(n)}>" for n in self.saves]
        return f"run({', '.join(gnames + saved)})"

    def _what(self, name: str) -> str:
        if name == "out":
            return "output"
        if name.startswith("out") and name[3:].isdigit():
            return f"output {int(name[3:])}"
        return f"input '{name}'"

    def _check_args(self, grads, saved: dict) -> None:
        desc, op = self.desc, self.desc.op + "_backward"
        if len(grads) != len(desc.outputs):
            raise InvalidProblemError(op, "grads", f"{len(desc.outputs)} arrays (one per output of the forward; "
                                      f"None for an output without gradient): {self.call_text()}", len(grads))
        for n in saved:
            if n not in self.saves:
                raise InvalidProblemError(op, n, f"only the saved tensors {list(self.saves)}: "
                                          f"{self.call_text()}", "an argument this backward does not take")
        for n in self.saves:
            if n not in saved:
                raise InvalidProblemError(op, n, f"the saved tensor '{n}' (the forward's {self._what(n)}, "
                                          f"{self._spec_for(n)}): {self.call_text()}", "nothing")
        want_dev = str(self.device)
        args = [(f"grads[{j}]", g, t) for j, (g, t) in enumerate(zip(grads, desc.outputs))
                if g is not None]
        args += [(n, saved[n], self._spec_for(n)) for n in self.saves]
        for arg, x, t in args:
            k = array_kind(op, arg, x)
            check_devices(op, (arg,), (device_text(x, k),), want_dev, "an array")
            shape = tuple(x.shape)
            if shape != t.shape:
                raise InvalidProblemError(op, arg, f"shape {t.shape} (the forward's "
                                          f"{self._what(arg) if arg in self.saves else 'output'}, {t})", shape)
            got = dtype_of(op, arg, x, t.dtype)
            if got != t.dtype:
                raise DTypeMismatchError(op, arg, f"{t.dtype} (the forward's "
                                         f"{self._what(arg) if arg in self.saves else 'output'})", str(got))
