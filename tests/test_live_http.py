"""The vLLM-server engine backend against a real `vllm serve` of the tiny model.

The server runs with VLLM_SERVER_DEV_MODE=1 (pause, resume and collective_rpc
routes); PipelineRL's in-flight weight updates exercise them all.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm")
httpx = pytest.importorskip("httpx")

from harness.core.config import RunConfig  # noqa: E402
from harness.core.trace import read_trace  # noqa: E402
from harness.run.execute import execute  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path_factory.mktemp("serve") / "serve.log", "w")  # noqa: SIM115
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
         "--dtype", "bfloat16", "--enforce-eager", "--max-model-len", "1024",
         "--kv-cache-memory-bytes", str(256 << 20), "--scheduling-policy", "priority",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"vllm server exited with {proc.returncode}; see {log.name}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail("vllm server did not come up in 180 s")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_pipelinerl_on_a_vllm_server(model_dir: Path, server: str, tmp_path: Path) -> None:
    cfg = RunConfig(system="pipelinerl", workload="arith", runtime="live", groups=4,
                    group_size=4, update_groups=2, rounds=2, max_response_tokens=32,
                    max_lag=0)  # admission waits for each update: later groups use new weights
    cfg.live.model_dir = str(model_dir)
    cfg.live.ray_address = "off"
    cfg.live.engine, cfg.live.engine_url = "vllm-http", server
    path = tmp_path / "http.jsonl"
    execute(cfg.validate(), path)
    events = read_trace(path)
    assert events[0]["live"]["engine"] == "vllm-http" and "error" not in events[-1]
    finishes = [e for e in events if e["ev"] == "request_finish"]
    assert len(finishes) == 2 * 4 * 4 and all(e["response_tokens"] > 0 for e in finishes)
    published = [e for e in events if e["ev"] == "weights_published"]
    assert [e["version"] for e in published] == [1, 2, 3, 4]
    assert all(e["in_flight"] for e in published)
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert all(0 < e["ess"] <= 1 for e in steps)
    # requests submitted after an update carry the version the server then held
    later = [e for e in finishes if e["versions"][0] > 0]
    assert later, "no response was generated with updated weights"
