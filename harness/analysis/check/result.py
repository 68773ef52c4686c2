"""One property's verdict: what was measured, against what, and where it first failed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Result:
    """`passed` is None when the property was not judged: no bound was stated for
    it, or the trace holds nothing it could be judged on (`detail` says which)."""

    name: str
    passed: bool | None
    value: float | int | None
    unit: str
    bound: float | int | None
    source: str  # where the bound came from
    detail: str
    first: dict[str, Any] | None = None  # the first offending event: t, ev, group, batch

    @property
    def status(self) -> str:
        if self.passed is None:  # measured but no bound to hold it to, or nothing to measure
            return "no bound stated" if self.value is not None else "not checked"
        return "pass" if self.passed else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


def offence(event: dict[str, Any], group: int | None = None,
            batch: int | None = None) -> dict[str, Any]:
    """Where a property first failed: the event's time and kind, the group and batch."""
    return {"t": event["t"], "ev": event["ev"], "group": group, "batch": batch}


def unjudged(name: str, unit: str, source: str, detail: str,
             value: float | int | None = None) -> Result:
    return Result(name, None, value, unit, None, source, detail)
