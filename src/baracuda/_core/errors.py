"""One error hierarchy, on builtin bases, so callers can catch either ours or the builtin."""
from __future__ import annotations

__all__ = [
    "BaracudaError", "UnsupportedError", "InvalidProblemError", "DTypeMismatchError",
    "BufferTooSmallError", "WorkspaceTooSmallError", "ArgumentTypeError", "DeviceMismatchError",
]


class BaracudaError(Exception):
    """Base of every error baracuda raises on purpose."""


class UnsupportedError(BaracudaError, NotImplementedError):
    """No backend can run this problem; ``refusals`` maps each backend to its reason."""

    def __init__(self, op: str, what: str, refusals: dict[str, str] | None = None):
        self.op = op
        self.refusals = dict(refusals or {})
        lines = [f"{op}: {what}"]
        for backend, why in self.refusals.items():
            lines.append(f"  - {backend}: {why}")
        super().__init__("\n".join(lines))


class InvalidProblemError(BaracudaError, ValueError):
    """The problem itself is malformed: a shape, an axis or an attribute is out of its domain."""

    def __init__(self, op: str, arg: str, expected: str, got: object):
        self.op, self.arg = op, arg
        super().__init__(f"{op}: argument '{arg}': expected {expected}, got {got}")


class ArgumentTypeError(InvalidProblemError, TypeError):
    """An argument of the wrong Python type: a list, None or a number where an array is expected, a string where an
    attribute takes an int.  A TypeError (as torch's for a wrong argument type) and an InvalidProblemError."""


class DeviceMismatchError(BaracudaError, RuntimeError):
    """An operand on the wrong device: operands on different devices, a meta tensor (no data) given to a plan, an
    ``out=`` or workspace off the plan's device.  A RuntimeError, as torch's own device errors."""

    def __init__(self, op: str, arg: str, expected: str, got: str):
        self.op, self.arg = op, arg
        note = " (a meta tensor has no data to compute on)" if got.startswith("meta") else ""
        super().__init__(f"{op}: argument '{arg}': expected {expected}, got one on {got}{note}")


class DTypeMismatchError(BaracudaError, TypeError):
    def __init__(self, op: str, arg: str, expected: str, got: object):
        self.op, self.arg = op, arg
        super().__init__(f"{op}: argument '{arg}': expected dtype {expected}, got {got}")


class BufferTooSmallError(BaracudaError, ValueError):
    def __init__(self, op: str, arg: str, needed: int, got: int, unit: str = "elements"):
        self.op, self.arg, self.needed, self.got = op, arg, needed, got
        super().__init__(f"{op}: buffer '{arg}' too small: needs {needed} {unit}, got {got}")


class WorkspaceTooSmallError(BaracudaError, ValueError):
    def __init__(self, op: str, needed: int, got: int):
        self.op, self.needed, self.got = op, needed, got
        super().__init__(f"{op}: workspace too small: needs {needed} bytes, got {got}")
