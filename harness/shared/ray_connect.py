"""Connecting to Ray, for the sweeps and the live runtime alike.

'local' starts a private Ray on this machine; any other address joins an
existing cluster and ships this checkout's code (`harness`, `systems`,
`workloads`) so its nodes run what the driver runs.

Why the probe: `ray.init` on an address where no cluster answers retries for
many minutes inside C++ code, deaf to Ctrl-C. So an address is first probed
with plain sockets (interruptible, bounded by `timeout_s()`): a TCP connect,
then the HTTP/2 greeting every gRPC server (Ray's GCS, Ray client) sends, then
the GCS's first question with this process's token (`ray_auth`): a cluster
that refuses it is said in one line at once, with how to authenticate. Only an
address that answers, and accepts us, reaches `ray.init`; every command with
--ray-address probes before it writes anything, and `connect` probes again.
While `ray.init` joins, Ray's own lines are kept off the terminal (`ray_quiet`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

from harness.core.config import ConfigError
from harness.core.notes import error_line
from harness.shared import ray_auth
from harness.shared.ray_quiet import Capture, quiet_stderr

NAMESPACE = "rolloutbench"
TIMEOUT_ENV = "ROLLOUTBENCH_RAY_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0
NO_PROBE = ("off", "local", "auto")  # nothing to probe: no Ray, a new one, or Ray's own search
WAIT = f"{TIMEOUT_ENV} sets it"  # said in every refusal of a slow answer
HELP = (f"An address that does not answer fails after {DEFAULT_TIMEOUT_S:.0f} s "
        f"(env {TIMEOUT_ENV}).")

# The client's HTTP/2 connection preface and an empty SETTINGS frame (RFC 9113, 3.4).
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04
_GET_CLUSTER_ID = "/ray.rpc.NodeInfoGcsService/GetClusterId"  # Ray's gcs_service.proto


def timeout_s() -> float:
    """Seconds an address may take to answer: $ROLLOUTBENCH_RAY_TIMEOUT, else 30."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{TIMEOUT_ENV}: expected seconds > 0, got {text!r}")
    return value


def host_port(address: str) -> tuple[str, int]:
    """'HOST:PORT' or 'ray://HOST:PORT' (IPv6 hosts in brackets) as (host, port)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--ray-address {address}: expected HOST:PORT, 'local' or 'off'")
    return host, int(port)


def check_address(address: str, timeout: float | None = None) -> None:
    """Raise ConfigError naming `address` unless Ray's GCS answers there within
    `timeout` seconds in all (default `timeout_s()`); 'off', 'local' and 'auto' pass."""
    if address in NO_PROBE:
        return
    limit = timeout_s() if timeout is None else timeout
    deadline = time.monotonic() + limit

    def left() -> float:
        return max(0.01, deadline - time.monotonic())
    host, port = host_port(address)
    where = f"--ray-address {address}"
    try:
        sock = socket.create_connection((host, port), timeout=limit)
    except socket.gaierror as err:
        raise ConfigError(f"{where}: cannot resolve host {host!r} ({err.strerror})") from None
    except TimeoutError:
        raise ConfigError(f"{where}: no answer within {limit:g} s ({WAIT})") from None
    except OSError as err:
        raise ConfigError(f"{where}: {err.strerror or err} (`ray start --head` there, or "
                          "'local')") from None
    with sock:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return  # a TLS server waits for the client's hello: the TCP answer must do
        sock.settimeout(left())
        _check_grpc(sock, where, limit)
    if "://" not in address:  # a GCS (not a Ray client server): ask it what ray.init asks
        _check_gcs(host, port, where, limit, left())


def _check_gcs(host: str, port: int, where: str, limit: float, left: float) -> None:
    """Call the GCS's GetClusterId, the first thing `ray.init` asks; a server that
    does not know it is no Ray cluster. Waited for in small steps, so Ctrl-C works."""
    try:
        import grpc
    except ImportError:  # no Ray either: `connect` says so
        return
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    token = ray_auth.metadata(where)  # what ray.init sends; a token mode with none: refused
    channel = grpc.insecure_channel(target)
    try:
        call = channel.unary_unary(_GET_CLUSTER_ID)
        future = call.future(b"", timeout=left, metadata=token)  # b"": GetClusterIdRequest
        answered = threading.Event()
        future.add_done_callback(lambda _f: answered.set())
        answered.wait(left + 1.0)
        future.result(timeout=0)
    except grpc.RpcError as err:
        code = err.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise ConfigError(f"{where}: no GCS answer in {limit:g} s ({WAIT})"
                              ) from None
        if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND):
            raise ConfigError(f"{where}: not Ray's GCS; give the head node's GCS port (6379?)"
                              ) from None
        if code == grpc.StatusCode.UNAVAILABLE:
            raise ConfigError(f"{where}: no Ray cluster answers there "
                              f"({err.details()})") from None
        if code == grpc.StatusCode.UNAUTHENTICATED:
            raise ConfigError(ray_auth.refused(where)) from None
        # anything else: ray.init explains it
    except grpc.FutureTimeoutError:
        raise ConfigError(f"{where}: no GCS answer in {limit:g} s ({WAIT})"
                          ) from None
    finally:
        channel.close()


def _check_grpc(sock: socket.socket, where: str, limit: float) -> None:
    """Send the HTTP/2 preface; a gRPC server's first frame back is SETTINGS."""
    head = b""
    try:
        sock.sendall(_PREFACE)
        while len(head) < 9:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                break
            head += chunk
    except TimeoutError:
        raise ConfigError(f"{where}: open, silent {limit:g} s ({WAIT})") from None
    except OSError as err:
        raise ConfigError(f"{where}: the connection failed ({err.strerror or err})") from None
    if len(head) < 9 or head[3] != _SETTINGS:
        raise ConfigError(f"{where}: not a Ray cluster (no gRPC); give its GCS port (6379?)")


def connect(address: str, num_cpus: int | None = None,
            env_vars: dict[str, str] | None = None) -> bool:
    """Connect unless connected already; True when this call connected (and so
    should call `ray.shutdown()` when done). Any failure is a one-line ConfigError
    naming the address: within `timeout_s()`, Ray's own lines kept off the terminal."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray-address: Ray is not installed (pip install -e '.[ray]')"
                          ) from None

    import harness
    import systems
    import workloads

    if ray.is_initialized():
        return False
    check_address(address)
    runtime_env: dict[str, Any] = {"env_vars": dict(env_vars or {})}
    if address == "local":
        # address="local": always a new private Ray; with no address, ray.init would
        # join any cluster `ray start` left on this machine.
        where: dict[str, Any] = {"address": "local", "num_cpus": num_cpus,
                                 "include_dashboard": False}
    else:
        where = {"address": address}
        runtime_env["py_modules"] = [harness, systems, workloads]
    kwargs = {**where, "namespace": NAMESPACE, "log_to_driver": False,
              "logging_level": logging.ERROR, "runtime_env": runtime_env}
    named = f"--ray-address {address}"
    if address == "local":  # starts processes: not to be abandoned half-way
        try:
            ray.init(**kwargs)
        except Exception as err:  # noqa: BLE001  (one line)
            raise ConfigError(f"{named}: {error_line(err)}") from None
        return True
    with quiet_stderr() as capture:
        try:
            _init_bounded(ray, address, kwargs, capture)
        except Exception as err:  # noqa: BLE001  (Ray's, of any kind, or our timeout: one line)
            if ray_auth.is_refusal(err, capture.text()):  # Ray's lines say why, its error not
                raise ConfigError(ray_auth.refused(named)) from None
            text = str(err) if isinstance(err, ConfigError) else f"{named}: {error_line(err)}"
            raise ConfigError(text + capture.note()) from None
    return True


def _init_bounded(ray: Any, address: str, kwargs: dict[str, Any], capture: Capture) -> None:
    """`ray.init` on a helper thread, waited for at most `timeout_s()`: a cluster
    that accepts the connection but never completes Ray's handshake (or a proxy
    in between) is given up on with one line, and Ctrl-C works while waiting.
    The abandoned thread is a daemon: it does not hold the process."""
    outcome: dict[str, BaseException | None] = {}
    done = threading.Event()

    def init() -> None:
        try:
            ray.init(**kwargs)
            outcome["error"] = None
        except BaseException as err:  # handed to the waiting thread
            outcome["error"] = err
        finally:
            done.set()

    limit = timeout_s()
    threading.Thread(target=init, name="ray-init", daemon=True).start()
    try:
        answered = done.wait(limit)
    except BaseException:  # Ctrl-C: the thread goes on, its lines still off the terminal
        capture.abandon()
        raise
    if not answered:
        capture.abandon()
        raise ConfigError(f"--ray-address {address}: no handshake in {limit:g} s "
                          f"({WAIT})")
    if outcome["error"] is not None:
        raise outcome["error"]
