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

__all__ = ["PLAN_DIR_ENV", "Built", "GraphCache", "handle", "stream_handle", "compute_capability", "current_device",
           "execute"]

# a directory: built plans are serialized there and loaded by later processes (unset: the process cache only)
PLAN_DIR_ENV = "BARACUDA_CUDNN_PLAN_DIR"


class Built:
    __slots__ = ("graph", "workspace")

    def __init__(self, graph, workspace: int):
        self.graph, self.workspace = graph, int(workspace)


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
    """The handle of ``device_index`` bound to torch's current stream there."""
    import cudnn
    import torch

    h = handle(device_index)
    cudnn.set_stream(h, torch.cuda.current_stream(device_index).cuda_stream)
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


def execute(b: Built, tensors: dict, ws, device_index: int, like) -> None:
    """Run built graph ``b`` on ``tensors`` ({uid: tensor}) on torch's current stream; ``ws``: a workspace of at least
    ``b.workspace`` bytes or None (then one is allocated like ``like``'s device)."""
    import torch

    if b.workspace and (ws is None or ws.numel() < b.workspace):   # strides other than the planned ones
        ws = torch.empty(b.workspace, dtype=torch.uint8, device=like.device)
    ws, h = ws if b.workspace else None, stream_handle(device_index)
    if _ORDERED[0]:
        # the frontend's ordered form (buffers + their uids; its metadata cached by value): no per-call variant-pack
        # dictionaries in Python (~0.1 ms of host time per call with the mapping form)
        try:
            b.graph.execute(tuple(tensors.values()), ws, handle=h, tensor_uids=tuple(tensors))
            return
        except (TypeError, ValueError):     # a frontend without it: the mapping form from now on
            _ORDERED[0] = False
    b.graph.execute(tensors, ws, handle=h)
