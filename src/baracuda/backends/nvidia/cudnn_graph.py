"""What every cuDNN-graph backend shares (``cudnn_sdpa.py``, ``cudnn_conv.py``): handles bound to torch's stream,
a process cache of built graphs (optionally persisted to ``BARACUDA_CUDNN_PLAN_DIR``), and the execute call.

A backend describes a graph by a hashable key (every dim, every stride, dtypes and attributes, the device's compute
capability) and a ``make(key, handle)`` that declares it (tensors with fixed uids, the node, outputs); a
:class:`GraphCache` builds each key once per (process, device) — ``validate -> build_operation_graph ->
create_execution_plans([A, FALLBACK]) -> check_support -> build_plans`` (``graph.build``) — or loads it from the plan
directory, where the frontend's serialization supports the engine.  A graph cuDNN refuses becomes an
``UnsupportedError`` naming the op and cuDNN's reason.

Execution hands the lowered graph's own execute a {uid: pointer} map and the plan index the build chose
(``_raw_execute``: the call the frontend's ``execute`` ends in, without its Python); where the frontend's internals
differ, the buffers go in uid order through its public ordered form (``tensor_uids=``), else its mapping form.
cuDNN forbids sharing a handle across threads: one handle per (thread, device), bound to torch's current stream
before each execute (the frontend skips cudnnSetStream when the stream did not change).
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Callable

from ..._core.errors import UnsupportedError
from .streams import raw_stream

__all__ = ["PLAN_DIR_ENV", "Built", "GraphCache", "handle", "stream_handle", "compute_capability", "current_device",
           "execute"]

# a directory: built plans are serialized there and loaded by later processes (unset: the process cache only)
PLAN_DIR_ENV = "BARACUDA_CUDNN_PLAN_DIR"


class Built:
    __slots__ = ("graph", "workspace", "raw")

    def __init__(self, graph, workspace: int):
        self.graph, self.workspace = graph, int(workspace)
        self.raw = None     # (the backend's execute, its plan index) or False: see _raw_execute


class GraphCache:
    """Built graphs by (key, device index): the process cache, then the plan directory, then a build.  ``tag`` names
    the backend's files in the plan directory; ``make(key, handle)`` declares the graph of a key (not built)."""

    def __init__(self, tag: str, make: Callable, size: int = 256):
        self.tag, self.make, self.size = tag, make, size
        self.graphs: "OrderedDict[tuple, Built]" = OrderedDict()
        self.counts = {"built": 0, "loaded": 0, "hits": 0}
        self._lock = threading.Lock()

    def info(self) -> dict:
        """Counters: built (paid the build), loaded (deserialized from the plan directory), hits; the size."""
        return dict(self.counts, size=len(self.graphs))

    def get(self, key, device_index: int, op: str | None = None) -> Built:
        ck = (key, device_index)
        b = self.graphs.get(ck)
        if b is not None:
            self.counts["hits"] += 1
            return b
        with self._lock:
            b = self.graphs.get(ck)
            if b is not None:
                return b
            import cudnn

            h = handle(device_index)
            path = self._file(key, device_index)
            g = None
            if path is not None and os.path.exists(path):
                try:
                    g = _load(path, h)
                    self.counts["loaded"] += 1
                except Exception:   # another libcudnn / GPU / a damaged file: rebuild and rewrite
                    g = None
            if g is None:
                try:
                    g = self.make(key, h)
                    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
                except (cudnn.cudnnGraphNotSupportedError, NotImplementedError, RuntimeError, ValueError) as e:
                    raise UnsupportedError(op or getattr(key, "op", self.tag),
                                           f"cuDNN refused the graph ({type(e).__name__}: {e})") from e
                self.counts["built"] += 1
                if path is not None:
                    _save(path, g)
            b = self.graphs[ck] = Built(g, g.get_workspace_size())
            while len(self.graphs) > self.size:
                self.graphs.popitem(last=False)
            return b

    def _file(self, key, device_index: int) -> str | None:
        root = os.environ.get(PLAN_DIR_ENV)
        if not root:
            return None
        import cudnn
        import torch

        ident = repr((key, torch.cuda.get_device_name(device_index), int(cudnn.backend_version()), cudnn.__version__))
        return os.path.join(root, f"{self.tag}-" + hashlib.sha256(ident.encode()).hexdigest()[:32] + ".cudnn")


def _load(path: str, h):
    import cudnn

    with open(path, "rb") as f:
        blob = f.read()
    g = cudnn.pygraph(handle=h)
    g.deserialize(h, blob)
    return g


def _save(path: str, g) -> None:
    try:
        blob = g.serialize(as_bytes=True)
    except Exception:   # an engine cuDNN cannot serialize: the process cache still holds the graph
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(bytes(blob))
    os.replace(tmp, path)   # atomic: concurrent processes never read a partial blob


# -- handles, streams, devices ------------------------------------------------------------------------------------
_TLS = threading.local()
_CC: dict = {}


def handle(device_index: int):
    """This thread's cuDNN handle on ``device_index``."""
    hs = getattr(_TLS, "handles", None)
    if hs is None:
        hs = _TLS.handles = {}
    h = hs.get(device_index)
    if h is None:
        import cudnn
        import torch

        with torch.cuda.device(device_index):
            h = hs[device_index] = cudnn.create_handle()
    return h


def stream_handle(device_index: int, stream: int | None = None):
    """The handle of ``device_index`` bound to torch's current stream there (``stream``: its raw value, if known)."""
    import cudnn

    h = handle(device_index)
    cudnn.set_stream(h, raw_stream(device_index) if stream is None else stream)
    return h


# workspaces up to this size are kept per (thread, device, stream) and reused: the autograd engine's device thread
# keeps its own, so a model's peak grows by at most twice this (session 11 run D: a 256 MB cap added 0.41 GB to the
# ResNet-50 step's peak, whose wgrad plans ask for large workspaces; those now come from the allocator per call)
_WS_KEEP = 32 << 20


def _workspace(nbytes: int, device_index: int, stream: int, like):
    """A workspace of at least ``nbytes`` on the device: this thread's buffer for the stream (calls on one stream run in
    order, so consecutive graphs may share it), allocated afresh while a CUDA graph is being captured (a kept buffer
    could be replaced later, under the captured graph) or past ``_WS_KEEP``."""
    import torch

    if nbytes > _WS_KEEP or (like.is_cuda and torch.cuda.is_current_stream_capturing()):
        return torch.empty(nbytes, dtype=torch.uint8, device=like.device)
    kept = getattr(_TLS, "ws", None)      # (thread-local: a thread's buffers go with it)
    if kept is None or kept[0] != _KEPT_GEN[0]:
        kept = _TLS.ws = (_KEPT_GEN[0], {})
    ws = kept[1].get((device_index, stream))
    if ws is None or ws.numel() < nbytes:
        ws = kept[1][(device_index, stream)] = torch.empty(min(max(nbytes, 1 << 20), _WS_KEEP), dtype=torch.uint8,
                                                           device=like.device)
    return ws


_KEPT_GEN = [0]


def drop_kept_workspaces() -> None:
    """Every thread's kept workspace is dropped at its next call (which allocates a new one): after ``_WS_KEEP``
    changes, or to hand the memory back to torch's allocator."""
    _KEPT_GEN[0] += 1


def compute_capability(device_index: int) -> tuple:
    cc = _CC.get(device_index)
    if cc is None:
        import torch

        cc = _CC[device_index] = tuple(torch.cuda.get_device_capability(device_index))
    return cc


def current_device() -> int:
    import torch

    return torch.cuda.current_device()


_ORDERED = [True]
RAW = [True]    # [False]: every call through the frontend's public execute (the A/B of bench/cudnn_host.py)


def _raw_execute(g):
    """The lowered (C++) graph's execute for a built graph the cuDNN backend runs, bound to the plan the build
    selected: ``(fn, cpp_index)``; ``fn(var_pack, workspace_ptr, [cpp_index,] backend_handle, None, None, None)``
    with ``var_pack`` {uid: device pointer}.  This is the call the frontend's ``execute`` ends in for such a graph,
    without its ~50 us of Python a call (its variant-pack normalisation, plan materialisation and engine dispatch,
    which for a built backend graph answer the same every time).  False where the graph is not of that kind (a
    Python engine) or this frontend lacks those members (then its public execute)."""
    try:
        if g.selected_engine is not None or not g._is_built:
            return False
        lowered = g._lowered_graph
        cfg = g._materialize_backend_plan(g._plan_index) if g._plans else None
        cpp = cfg.cpp_index if cfg is not None else None
        return (lowered._execute, None) if cpp is None else (lowered._execute_plan_at_index, cpp)
    except Exception:   # noqa: BLE001  (another frontend's internals: its public execute)
        return False


def execute(b: Built, tensors: dict, ws, device_index: int, like) -> None:
    """Run built graph ``b`` on ``tensors`` ({uid: tensor}) on torch's current stream; ``ws``: a workspace of at least
    ``b.workspace`` bytes or None (then one is allocated like ``like``'s device)."""
    import torch

    stream = raw_stream(device_index)
    if b.workspace and (ws is None or ws.numel() < b.workspace):   # strides other than the planned ones
        ws = _workspace(b.workspace, device_index, stream, like)
    ws, h = ws if b.workspace else None, stream_handle(device_index, stream)
    if RAW[0]:
        if b.raw is None:
            b.raw = _raw_execute(b.graph)
        raw = b.raw
    else:
        raw = False
    if raw:
        fn, cpp = raw
        pack = {u: t.data_ptr() for u, t in tensors.items()}
        wp = ws.data_ptr() if ws is not None else 0
        try:
            if cpp is None:
                fn(pack, wp, h.backend_handle, None, None, None)
            else:
                fn(pack, wp, cpp, h.backend_handle, None, None, None)
            return
        except TypeError:   # the bindings' signature differs (another frontend): its public execute from now on
            b.raw = False
    if _ORDERED[0]:
        # the frontend's ordered form (buffers + their uids; its metadata cached by value): no per-call variant-pack
        # dictionaries in Python (~0.1 ms of host time per call with the mapping form)
        try:
            b.graph.execute(tuple(tensors.values()), ws, handle=h, tensor_uids=tuple(tensors))
            return
        except (TypeError, ValueError):     # a frontend without it: the mapping form from now on
            _ORDERED[0] = False
    b.graph.execute(tensors, ws, handle=h)
