"""What every cuDNN-graph backend shares (``cudnn_sdpa.py``, ``cudnn_conv.py``): handles bound to torch's stream,
a process cache of built graphs (optionally persisted to ``BARACUDA_CUDNN_PLAN_DIR``), and the execute call.

A backend describes a graph by a hashable key (every dim, every stride, dtypes and attributes, the device's compute
capability) and a ``make(key, handle)`` that declares it (tensors with fixed uids, the node, outputs); a
:class:`GraphCache` builds each key once per (process, device) — ``validate -> build_operation_graph ->
create_execution_plans([A, FALLBACK]) -> check_support -> build_plans`` (``graph.build``) — or loads it from the plan
directory, where the frontend's serialization supports the engine.  A graph cuDNN refuses becomes an
``UnsupportedError`` naming the op and cuDNN's reason.

Execution passes the buffers in uid order with the frontend's ordered form (``tensor_uids=``: metadata cached by value
inside the frontend, no per-call variant-pack dictionaries), falling back to the mapping form on a frontend without it.
After a graph's first execute, a graph on a cuDNN backend plan is launched directly: the operands' addresses in
ascending uid order handed to the plan's launch (what the frontend's execute does after its Python-side binding),
~60 us of host time less per call; ``BARACUDA_CUDNN_RAW_EXECUTE=0`` keeps the frontend's execute.
cuDNN forbids sharing a handle across threads: one handle per (thread, device), bound to torch's current stream
(set only when the stream changed).
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

from ..._core.errors import UnsupportedError

__all__ = ["PLAN_DIR_ENV", "Built", "GraphCache", "handle", "stream_handle", "compute_capability", "current_device",
           "execute"]

# a directory: built plans are serialized there and loaded by later processes (unset: the process cache only)
PLAN_DIR_ENV = "BARACUDA_CUDNN_PLAN_DIR"


class Built:
    __slots__ = ("graph", "workspace", "raw")

    def __init__(self, graph, workspace: int):
        self.graph, self.workspace = graph, int(workspace)
        self.raw = None     # (launch, operand uids ascending, plan index) once known; False: not available


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


def stream_handle(device_index: int):
    """The handle of ``device_index`` bound to torch's current stream there (set only when the stream changed)."""
    import torch

    h = handle(device_index)
    stream = torch.cuda.current_stream(device_index).cuda_stream
    bound = _TLS.__dict__.setdefault("streams", {})
    if bound.get(device_index) != stream:
        import cudnn

        cudnn.set_stream(h, stream)
        bound[device_index] = stream
    return h


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


def _raw_launch(g, tensors: dict):
    """(launch, uids, plan index) of a built graph that runs on a cuDNN backend plan, for ``execute``'s direct path;
    False where the frontend does not expose it (a Python engine, another frontend version, operands it binds
    itself).  Reads frontend internals, so any surprise means False: the public execute stays the path."""
    if not _RAW[0]:
        return False
    try:
        if not g._is_built or g.selected_engine is not None or g._lowered_graph is None:
            return False
        uids = tuple(g._variant_pack_uids() or ())
        if not uids or set(uids) != set(tensors) or g._data_bindings:
            return False
        cfg = g._materialize_backend_plan(g._plan_index) if g._plans else None
        index = -1 if cfg is None or cfg.cpp_index is None else int(cfg.cpp_index)
        return g._lowered_graph._execute_with_raw_ptrs, uids, index
    except Exception:   # noqa: BLE001  (a frontend without these internals)
        return False


_RAW = [os.environ.get("BARACUDA_CUDNN_RAW_EXECUTE", "1") != "0"]


def execute(b: Built, tensors: dict, ws, device_index: int, like) -> None:
    """Run built graph ``b`` on ``tensors`` ({uid: tensor}) on torch's current stream; ``ws``: a workspace of at least
    ``b.workspace`` bytes or None (then one is allocated like ``like``'s device)."""
    import torch

    if b.workspace and (ws is None or ws.numel() < b.workspace):   # strides other than the planned ones
        ws = torch.empty(b.workspace, dtype=torch.uint8, device=like.device)
    ws, h = ws if b.workspace else None, stream_handle(device_index)
    raw = b.raw
    if raw:
        # the backend plan's own launch: the operands' addresses in ascending uid order (what the frontend's execute
        # hands the backend after its Python-side binding; ~10 us of host time instead of ~60 per call on the H100)
        launch, uids, index = raw
        ptrs = np.fromiter([tensors[u].data_ptr() for u in uids], dtype=np.uint64, count=len(uids))
        launch(ptrs.ctypes.data, len(uids), ws.data_ptr() if ws is not None else 0, h.backend_handle, index)
        return
    if _ORDERED[0]:
        # the frontend's ordered form (buffers + their uids; its metadata cached by value): no per-call variant-pack
        # dictionaries in Python (~0.1 ms of host time per call with the mapping form)
        try:
            b.graph.execute(tuple(tensors.values()), ws, handle=h, tensor_uids=tuple(tensors))
            if raw is None:
                b.raw = _raw_launch(b.graph, tensors)
            return
        except (TypeError, ValueError):     # a frontend without it: the mapping form from now on
            _ORDERED[0] = False
    b.graph.execute(tensors, ws, handle=h)
