"""Connecting to Ray, for the sweeps and the live runtime alike.

'local' starts a private Ray on this machine; any other address joins an
existing cluster and ships this checkout's code (`harness`, `systems`,
`workloads`) so its nodes run what the driver runs.
"""

from __future__ import annotations

import logging
from typing import Any

NAMESPACE = "rolloutbench"


def connect(address: str, num_cpus: int | None = None,
            env_vars: dict[str, str] | None = None) -> bool:
    """Connect unless connected already; True when this call connected (and so
    should call `ray.shutdown()` when done)."""
    import ray

    import harness
    import systems
    import workloads

    if ray.is_initialized():
        return False
    runtime_env: dict[str, Any] = {"env_vars": dict(env_vars or {})}
    if address == "local":
        where: dict[str, Any] = {"num_cpus": num_cpus, "include_dashboard": False}
    else:
        where = {"address": address}
        runtime_env["py_modules"] = [harness, systems, workloads]
    try:
        ray.init(**where, namespace=NAMESPACE, log_to_driver=False,
                 logging_level=logging.ERROR, runtime_env=runtime_env)
    except ConnectionError as err:
        raise ConnectionError(f"{err}; a cluster started with token authentication (Ray's "
                              "default) needs RAY_AUTH_MODE=token here too") from None
    return True
