"""The environment every live process runs with (this process, and Ray's actors)."""

from __future__ import annotations

LIVE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}


def use_in_process() -> None:
    """Set the live environment in this process (keeping what the user set), with
    vLLM's own logging at errors only: for runs that start one engine here and lend
    it to many (validate's grid, the live demo)."""
    import os

    for key, value in {**LIVE_ENV, "VLLM_LOGGING_LEVEL": "ERROR"}.items():
        os.environ.setdefault(key, value)
