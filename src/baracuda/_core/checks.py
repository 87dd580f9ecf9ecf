"""Device-side value checks: how a kernel's "bad input" flag becomes an exception.

Some problems are only known to be bad once the data is read: a class index out of range, a BCE input outside
[0, 1], a negative variance.  Those kernels never read out of bounds (they clamp for the loads), write NaN for
the bad rows and set a flag word on the device.  ``flagged`` turns the flag into an error the way
``PlanPreference.check_values`` says:

* ``"deferred"`` (default): the flag is copied into pinned host memory behind the kernels on the same stream
  (no host synchronization: the host keeps queueing work, as with torch's own asynchronous device asserts) and
  checked when the copy has landed — at the start of any later ``Plan.run`` whose GPU work has caught up, at
  ``baracuda.check_errors()`` (which waits for it), or when more than ``MAX_PENDING`` checks are queued (the
  oldest is waited for).  The error names the op of the call that had the bad value.
* ``"sync"``: the flag is read back right after the launch and the call itself raises (one host
  synchronization per call: a debugging aid, like CUDA_LAUNCH_BLOCKING).
* ``"off"``: never read; the bad rows' results are NaN.

Arrays off the GPU (the Triton interpreter) are checked at once in every mode but "off": reading them costs
nothing.  Under CUDA-graph capture nothing is read (the replay's NaN is the signal).
"""
from __future__ import annotations

import atexit
from collections import deque
from typing import Callable

MODES = ("deferred", "sync", "off")
MAX_PENDING = 256
PENDING: deque = deque()          # (event, pinned slot, make_error), oldest first; Plan.run polls when non-empty
_SLOTS: dict = {}                 # dtype -> free pinned 1-element tensors
_EVENTS: list = []                # free CUDA events

_NOTE = ("found by baracuda's deferred value check after the call returned; PlanPreference(check_values='sync') "
         "raises at the call itself")


def mode_of(value) -> str:
    """PlanPreference.check_values normalized: True means 'sync', False 'off'."""
    if value is True:
        return "sync"
    if value is False:
        return "off"
    if value in MODES:
        return value
    raise ValueError(f"PlanPreference: check_values must be one of {MODES} (or True = 'sync', False = 'off'), "
                     f"got {value!r}")


def flagged(flag, pref, make_error: Callable[[float], Exception]) -> None:
    """Raise ``make_error(value)`` (now or later, see the module doc) if the 1-element device tensor ``flag`` is
    non-zero (its value may say which check failed: BCE's input or target).  Call it right after the launches
    that set the flag, on the stream they ran on."""
    mode = pref.check_values if pref is not None else "deferred"
    if mode == "off":
        return
    if flag.device.type != "cuda":
        v = flag.reshape(-1)[0].item()
        if v != 0:
            raise make_error(v)
        return
    import torch

    if _capturing():
        return
    if mode == "sync":
        v = flag.reshape(-1)[0].item()
        if v != 0:
            raise make_error(v)
        return
    free = _SLOTS.setdefault(flag.dtype, [])
    slot = free.pop() if free else _pinned_slot(torch, flag.dtype)
    slot.copy_(flag, non_blocking=True)          # (a 0-d or 1-element flag: broadcast into the slot)
    ev = _EVENTS.pop() if _EVENTS else torch.cuda.Event()
    ev.record(torch.cuda.current_stream(flag.device))
    PENDING.append((ev, slot, make_error))
    if len(PENDING) > MAX_PENDING:
        PENDING[0][0].synchronize()
        poll()


def _pinned_slot(torch, dtype):
    """A 1-element pinned host tensor for a flag's copy.  device="cpu" always: under
    ``torch.set_default_device("cuda")`` a factory without it allocates on the default device, and pinning a CUDA
    tensor fails ("Only dense CPU tensors can be pinned")."""
    return torch.empty(1, dtype=dtype, device="cpu", pin_memory=True)


def _capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (torch's C query: this runs on every call while checks
    are queued; torch.cuda.is_current_stream_capturing adds Python frames around the same query)."""
    import torch

    query = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
    if query is None:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    return torch.cuda.is_initialized() and query()


def _settle(entry):
    """Recycle one landed entry; its error (with the deferred note) or None."""
    ev, slot, make_error = entry
    v = slot.item()
    _SLOTS.setdefault(slot.dtype, []).append(slot)
    _EVENTS.append(ev)
    if v == 0:
        return None
    err = make_error(v)
    err.add_note(_NOTE)
    return err


def poll() -> None:
    """Settle the queued checks whose copies have landed (oldest first, stopping at the first still in flight)
    without waiting; raise the first error found (later ones stay queued: each is raised in turn).  Plan.run
    calls this when checks are queued.  Inside a CUDA-graph capture nothing is polled (a capture forbids event
    queries); the next call outside it does."""
    if _capturing():
        return
    while PENDING and PENDING[0][0].query():
        err = _settle(PENDING.popleft())
        if err is not None:
            raise err


def check_errors() -> None:
    """Wait for the queued device-side value checks and raise the first error found (later ones stay queued;
    see the module doc).  Call it where a training loop wants bad input reported at a known point (not inside a
    CUDA-graph capture)."""
    while PENDING:
        PENDING[0][0].synchronize()
        err = _settle(PENDING.popleft())
        if err is not None:
            raise err


def discard() -> None:
    """Wait for the queued checks and drop them without raising (a caller that already failed, such as a benchmark
    row that errored, so its checks do not surface in the next, unrelated call)."""
    try:
        while PENDING:
            PENDING[0][0].synchronize()
            _settle(PENDING.popleft())
    except RuntimeError:    # a device already in error: forget the rest
        PENDING.clear()


@atexit.register
def _at_exit():
    from .errors import BaracudaError

    import warnings

    while PENDING:
        try:
            check_errors()
        except BaracudaError as e:      # nothing is left to raise into at exit: say it instead
            warnings.warn(f"baracuda: a deferred value check failed and was never raised: {e}", RuntimeWarning,
                          stacklevel=1)
