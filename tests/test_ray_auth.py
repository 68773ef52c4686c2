"""--ray-address against a real Ray cluster started with token authentication
(`RAY_AUTH_MODE=token ray start --head`): without the token, or with a wrong
one, a command stops at once with one line saying how to authenticate (exit
code 2, none of Ray's own lines, nothing written), whether or not
ROLLOUTBENCH_RAY_TIMEOUT is set; with the token, a sweep runs on the cluster.

The cluster is this module's own (`--block`, its own process group, free ports,
its own temp dir); every process of it is killed at the end, by its group.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
TOKEN = secrets.token_hex(16)
SPEC = '[base]\nworkload = "sci-jl"\ngroups = 4\ngroup_size = 2\nrounds = 1\n' \
       '[grid]\nsystem = ["cgp"]\n'
PLAN = ["plan", "--model", "qwen3-8b", "--gpus", "8", "--gpu", "h100-sxm", "--workload",
        "lsat-ar", "--budget", "2", "-j", "1"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environ(**extra: str) -> dict[str, str]:
    """This process's environment without any Ray authentication, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAY_AUTH") and k not in ("COLUMNS", "FORCE_COLOR")}
    return {**env, **extra}


def _left(pgid: int, temp: Path) -> list[str]:
    """The cluster's processes still running: in its group, or naming its temp dir."""
    out = subprocess.run(["ps", "-eo", "pgid=,pid=,args="], capture_output=True, text=True,
                         check=False).stdout
    return [line for line in out.splitlines()
            if line.split()[0] == str(pgid) or str(temp) in line]


def _stop(proc: subprocess.Popen[bytes], temp: Path) -> list[str]:
    """SIGKILL to the cluster's process group (SIGTERM would drain for 30 s; a test
    cluster holds nothing to keep); returns what is still running after 15 s."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=15)
    deadline = time.monotonic() + 15
    while _left(proc.pid, temp) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _left(proc.pid, temp)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A one-CPU Ray cluster with token authentication; yields its GCS address."""
    try:
        from ray._raylet import AuthenticationMode  # noqa: F401
    except ImportError:
        pytest.skip("this Ray has no token authentication")
    temp = Path(tempfile.mkdtemp(prefix="rb-ray-", dir="/tmp"))  # short: Ray's socket paths
    port = free_port()
    ports = {f"--{name}": str(free_port()) for name in (
        "ray-client-server-port", "dashboard-port", "dashboard-agent-listen-port",
        "dashboard-agent-grpc-port", "metrics-export-port", "runtime-env-agent-port")}
    cmd = [str(BIN / "ray"), "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
           "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}",
           *[f"{k}={v}" for k, v in ports.items()]]
    log = temp / "ray-start.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=environ(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while b"Ray runtime started" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start failed:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        left = _stop(proc, temp)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, left


def rolloutbench(*args: str, cwd: Path, env: dict[str, str]) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run([str(BIN / "rolloutbench"), *args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr, time.monotonic() - start


COMMANDS = {"sweep": ["sweep", "spec.toml"], "plan": PLAN,
            "run": ["run", "--runtime", "live"]}


@pytest.mark.parametrize("timeout_env", [{}, {"ROLLOUTBENCH_RAY_TIMEOUT": "5"}],
                         ids=["default-wait", "env-timeout"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_without_the_token_one_line_says_how_to_authenticate(
        cluster: str, tmp_path: Path, command: str, timeout_env: dict[str, str]) -> None:
    (tmp_path / "spec.toml").write_text(SPEC)
    rc, err, took = rolloutbench(*COMMANDS[command], "--out", "o", "--ray-address", cluster,
                                 cwd=tmp_path, env=environ(**timeout_env))
    assert rc == 2, err
    assert err.strip().splitlines() == [
        f"error: --ray-address {cluster}: the cluster requires token authentication: set "
        "RAY_AUTH_MODE=token and give the cluster's token in RAY_AUTH_TOKEN, the file "
        "RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token"], err
    assert took < 30  # at once, not after Ray's ~20 s of retries
    assert not (tmp_path / "o").exists()


def test_a_wrong_token_is_named(cluster: str, tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text(SPEC)
    rc, err, took = rolloutbench("sweep", "spec.toml", "--out", "o", "--ray-address", cluster,
                                 cwd=tmp_path, env=environ(RAY_AUTH_MODE="token",
                                                           RAY_AUTH_TOKEN="not-" + TOKEN))
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: --ray-address {cluster}: the cluster refused the token from RAY_AUTH_TOKEN "
        "(RAY_AUTH_MODE=token)"), err
    assert took < 30 and not (tmp_path / "o").exists()


def test_token_mode_without_a_token_file(cluster: str, tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text(SPEC)
    rc, err, _ = rolloutbench("sweep", "spec.toml", "--out", "o", "--ray-address", cluster,
                              cwd=tmp_path, env=environ(RAY_AUTH_MODE="token",
                                                        RAY_AUTH_TOKEN_PATH="missing"))
    assert rc == 2, err
    assert err.strip().splitlines() == [
        f"error: --ray-address {cluster}: RAY_AUTH_MODE=token, but RAY_AUTH_TOKEN_PATH names "
        "missing, a missing or empty file"], err
    assert not (tmp_path / "o").exists()


def test_ray_init_refused_past_the_probe_is_quiet(cluster: str, tmp_path: Path) -> None:
    """Should the probe let a refused client through (a TLS cluster is not probed),
    `ray.init`'s own refusal is the same one line: Ray's C++ warnings, a line a
    second on fd 2, are kept off the terminal and read for the cause."""
    code = ("import sys\n"
            "from harness.core.config import ConfigError\n"
            "from harness.shared import ray_connect\n"
            "ray_connect.check_address = lambda address: None\n"
            "try:\n"
            f"    ray_connect.connect({cluster!r})\n"
            "except ConfigError as err:\n"
            "    print(f'error: {err}', file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60,
                          env=environ(ROLLOUTBENCH_RAY_TIMEOUT="4", TMPDIR=str(tmp_path)))
    assert proc.stderr.strip().splitlines() == [
        f"error: --ray-address {cluster}: the cluster requires token authentication: set "
        "RAY_AUTH_MODE=token and give the cluster's token in RAY_AUTH_TOKEN, the file "
        "RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token"], proc.stderr
    assert not list(tmp_path.glob("rolloutbench-ray-*"))  # the capture: not kept


def test_with_the_token_a_sweep_runs_on_the_cluster(cluster: str, tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text(SPEC)
    rc, err, _ = rolloutbench("sweep", "spec.toml", "--out", "o", "--ray-address", cluster,
                              cwd=tmp_path, env=environ(RAY_AUTH_MODE="token",
                                                        RAY_AUTH_TOKEN=TOKEN))
    assert rc == 0, err
    # none of Ray's lines: only the sweep's own progress (plain lines when piped)
    assert all(line.startswith("sweep: cells: ") for line in err.splitlines()), err
    assert (tmp_path / "o" / "results.csv").read_text().count("\n") == 2  # header, one round
