"""Devices and run-time architecture detection (never at install time)."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .sku import Arch

__all__ = ["Device", "as_device", "cuda_available", "triton_interpreting", "check_devices"]


@dataclass(frozen=True)
class Device:
    type: str          # "cpu" or "cuda"
    index: int = 0

    def __post_init__(self):
        if self.type not in ("cpu", "cuda"):
            raise ValueError(f"device: expected 'cpu' or 'cuda[:N]', got {self.type!r}")

    @property
    def arch(self) -> Arch:
        return _arch(self.type, self.index)

    @property
    def name(self) -> str:
        if self.type == "cpu":
            return "cpu"
        import torch

        return torch.cuda.get_device_name(self.index)

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"


@functools.lru_cache(maxsize=None)
def _arch(type_: str, index: int) -> Arch:
    if type_ == "cpu":
        return Arch.CPU
    import torch

    return Arch.from_capability(*torch.cuda.get_device_capability(index))


@functools.lru_cache(maxsize=None)
def as_device(x) -> Device:
    """'cpu', 'cuda', 'cuda:1', a torch.device or a Device -> Device."""
    if isinstance(x, Device):
        return x
    if x is None:
        return Device("cuda") if cuda_available() else Device("cpu")
    s = str(x)
    if ":" in s:
        t, i = s.split(":", 1)
        return Device(t, int(i))
    return Device(s)


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def check_devices(op: str, names, devices, expected: str | None = None, what: str = "a tensor") -> None:
    """The one device check of every call path (``Plan.run``, ``BackwardPlan.run``, the torch drop-ins and their
    custom ops): every operand on ``expected`` (default: the first operand's device), as torch wants of one call.

    names: the operands' argument names; devices: one per operand, anything whose ``str`` is torch's device text
    (a torch.device, a Device, 'cpu'); what: the message's noun ("an array" for the Plan API).  A meta tensor matches only 'meta' (a fake tensor mode's call); a plan, which
    computes, never expects 'meta'.  Raises DeviceMismatchError (a RuntimeError) naming the first operand off it.
    """
    want = expected
    first = None
    for name, d in zip(names, devices):
        d = str(d)
        if want is None:
            want, first = d, name
            continue
        if d != want:
            from .errors import DeviceMismatchError

            where = f"{what} on {want}" + (f" (the device of '{first}': the operands of one call are on one device)"
                                             if first is not None else "")
            raise DeviceMismatchError(op, name, where, d)


def triton_interpreting() -> bool:
    """Triton's own switch: its interpreter runs kernels on CPU tensors (how CI tests our kernels)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
