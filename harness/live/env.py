"""The environment every live process runs with (this process, and Ray's actors)."""

from __future__ import annotations

LIVE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
