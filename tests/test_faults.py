"""Faults end cleanly: a Ray address that does not answer fails within its bound
with one line naming it and leaves nothing behind; Ctrl-C (or `kill`) on a
simulated run ends with one line, exit code 130, and a trace closed by `run_end`.

Commands run as subprocesses (a signal needs a process of its own). No test
measures time: a bound is a subprocess timeout that only a hang would hit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.config import ConfigError
from harness.shared import ray_connect

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
LONG_RUN = ["run", "--system", "cgp", "-R", "256", "--rounds", "40"]


def start(*args: str, cwd: Path, **env: str) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    return subprocess.Popen([ROLLOUTBENCH, *args], cwd=cwd, env={**environ, **env},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A port that accepts connections and never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def address_of(sock: socket.socket) -> str:
    return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("command", [
    ["run", "--runtime", "live", "--out", "o"],
    ["sweep", "spec.toml", "--out", "o"],
])
def test_a_silent_ray_address_fails_within_its_bound(tmp_path: Path, silent: socket.socket,
                                                     command: list[str]) -> None:
    (tmp_path / "spec.toml").write_text('[base]\nworkload = "sci-jl"\ngroups = 4\n')
    address = address_of(silent)
    proc = start(*command, "--ray-address", address, cwd=tmp_path,
                 ROLLOUTBENCH_RAY_TIMEOUT="1")
    out, err = proc.communicate(timeout=60)  # unbounded, it would hang here
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [
        f"error: --ray-address {address}: a port is open there but nothing answered "
        f"within 1 s (ROLLOUTBENCH_RAY_TIMEOUT sets the wait)"]
    assert not (tmp_path / "o").exists()  # a run that never started leaves no folder


def test_ctrl_c_while_probing_a_ray_address(tmp_path: Path, silent: socket.socket) -> None:
    proc = start("run", "--runtime", "live", "--out", "o", "--ray-address",
                 address_of(silent), cwd=tmp_path)
    silent.settimeout(60)
    conn, _ = silent.accept()  # the command is now waiting for an answer
    conn.close()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["error: interrupted"]
    assert not (tmp_path / "o").exists()


def test_the_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ray_connect.TIMEOUT_ENV, raising=False)
    assert ray_connect.timeout_s() == 30.0
    monkeypatch.setenv(ray_connect.TIMEOUT_ENV, "2.5")
    assert ray_connect.timeout_s() == 2.5
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv(ray_connect.TIMEOUT_ENV, bad)
        with pytest.raises(ConfigError, match=f"^{ray_connect.TIMEOUT_ENV}: expected"):
            ray_connect.timeout_s()


@pytest.mark.parametrize(("address", "named"), [
    ("10.0.0.1", "expected HOST:PORT"),
    ("10.0.0.1:99999", "expected HOST:PORT"),
    ("ray://10.0.0.1", "expected HOST:PORT"),
])
def test_malformed_addresses_are_named(address: str, named: str) -> None:
    with pytest.raises(ConfigError, match=f"^--ray-address {address}: {named}"):
        ray_connect.check_address(address)


def test_a_ray_init_that_never_returns_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the probe (a cluster, or a proxy, that answers), `ray.init` itself may
    hang in C++ code: it runs on a daemon thread and is given up on in time."""
    release = threading.Event()
    fake = types.ModuleType("ray")
    fake.is_initialized = lambda: False  # type: ignore[attr-defined]
    fake.init = lambda **_: release.wait()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_connect, "check_address", lambda address: None)
    monkeypatch.setenv(ray_connect.TIMEOUT_ENV, "0.2")
    try:
        with pytest.raises(ConfigError, match=r"^--ray-address 10\.1\.2\.3:6379: the cluster "
                           r"did not complete Ray's handshake within 0\.2 s"):
            ray_connect.connect("10.1.2.3:6379")
    finally:
        release.set()  # let the abandoned thread end


def _wait_for_events(trace: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if trace.exists() and trace.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{trace}: fewer than {count} events after 60 s")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_a_simulated_run_is_quiet(tmp_path: Path, sig: signal.Signals) -> None:
    proc = start(*LONG_RUN, "--out", "x", cwd=tmp_path)
    trace = tmp_path / "x" / "trace.jsonl"
    _wait_for_events(trace, 200)  # well inside the run (it has ~400,000 events)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines() == [f"error: interrupted; the trace {Path('x') / 'trace.jsonl'}"
                                        " is closed"], err[-2000:]
    assert out == ""
    lines = trace.read_text().splitlines()
    assert json.loads(lines[-1]) == {"t": json.loads(lines[-1])["t"], "ev": "run_end",
                                     "error": "interrupted"}
    assert sum('"ev":"run_end"' in line for line in lines) == 1
    assert not (tmp_path / "x" / "metrics.json").exists()  # no metrics of half a run


@pytest.fixture
def grpc_server() -> Iterator[tuple[str, list[str]]]:
    """A gRPC server that knows only GetClusterId (as a Ray GCS does); yields its
    address and the methods called."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    called: list[str] = []

    class Handler(grpc.GenericRpcHandler):
        def service(self, details):  # type: ignore[no-untyped-def]
            called.append(details.method)
            if details.method != "/ray.rpc.NodeInfoGcsService/GetClusterId":
                return None  # UNIMPLEMENTED
            return grpc.unary_unary_rpc_method_handler(lambda request, context: b"")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1), handlers=[Handler()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", called
    server.stop(None)


def test_a_gcs_passes_the_probe(grpc_server: tuple[str, list[str]]) -> None:
    address, called = grpc_server
    ray_connect.check_address(address, timeout=10)
    assert called == ["/ray.rpc.NodeInfoGcsService/GetClusterId"]


def test_a_grpc_server_that_is_no_gcs_is_named(grpc_server: tuple[str, list[str]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    address, _ = grpc_server
    monkeypatch.setattr(ray_connect, "_GET_CLUSTER_ID", "/other.Service/GetClusterId")
    with pytest.raises(ConfigError, match=f"^--ray-address {address}: something answers "
                       "there, but not a Ray cluster's GCS"):
        ray_connect.check_address(address, timeout=10)


def test_a_server_that_speaks_no_grpc_is_named() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = address_of(server)

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        with pytest.raises(ConfigError, match=f"^--ray-address {address}: something answers "
                           r"there, but not a Ray cluster \(no gRPC\)"):
            ray_connect.check_address(address, timeout=10)
        thread.join(10)
