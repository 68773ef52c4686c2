"""A benchmark problem and the error a bad dataset file raises: shared by the
loaders (workloads.datasets, and workloads.olympiadbench, which datasets calls)."""

from __future__ import annotations

from dataclasses import dataclass


class DatasetError(ValueError):
    """A dataset file that is missing or breaks its published shape; the message
    names the file and the line or record index."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem: the text a model is prompted with, and its reference answer."""

    id: str
    text: str
    answer: str
    source: str
