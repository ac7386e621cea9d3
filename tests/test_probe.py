"""`kvsize probe URL` against loopback stand-ins for running engines (payloads in tests/data/probe, sources in
its SOURCES.md): a vLLM 0.19.0 and a 0.33.0 server, an older (V0) server's labels, a server whose blocks are 30%
off (exit 1), no server at all (exit 3) and a server that is no engine (exit 2). No network beyond 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvsize.cli.app import app
from kvsize.probe import cache_config_info

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "probe"
GIB = 1024**3


def _routes(metrics: str, models: str | None, version: str | None) -> dict[str, tuple[str, str]]:
    routes = {"/metrics": ((DATA / metrics).read_text(), "text/plain; version=0.0.4")}
    if models:
        routes["/v1/models"] = ((DATA / models).read_text(), "application/json")
    if version:
        routes["/version"] = ((DATA / version).read_text(), "application/json")
    return routes


@contextmanager
def serving(routes: dict[str, tuple[str, str]]) -> Iterator[str]:
    """A loopback server answering GET `routes` (path -> (body, content type)), 404 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
            body, kind = routes.get(self.path.split("?")[0], ("", ""))
            data = body.encode()
            self.send_response(200 if kind else 404)
            self.send_header("Content-Type", kind or "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def probe(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["probe", *args])
    return result.exit_code, result.stdout, result.stderr


def figures(stdout: str) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in json.loads(stdout)["figures"]}


def test_labels_parsed_with_prometheus_parser() -> None:
    (labels,) = cache_config_info((DATA / "vllm-0.19.0-llama31-8b-h100.metrics").read_text())
    assert (labels["num_gpu_blocks"], labels["block_size"], labels["engine"]) == ("29751", "16", "0")


def test_vllm_0_19_on_h100_within_tolerance() -> None:
    routes = _routes(
        "vllm-0.19.0-llama31-8b-h100.metrics", "vllm-0.19.0-llama31-8b-h100.models.json", "vllm-0.19.0.version.json"
    )
    with serving(routes) as url:
        code, out, err = probe(url + "/v1/", "--gpu", "h100", "--json")
    assert code == 0, err + out
    data = json.loads(out)
    assert (data["engine"], data["engine_version"], data["model"]) == (
        "vllm",
        "0.19.0",
        "meta-llama/Llama-3.1-8B-Instruct",
    )
    figs = figures(out)
    # One block: 16 tokens x 32 layers x 8 KV heads x (128 + 128) x 2 B = 2 MiB, so the served KV memory is
    # 29,751 x 2 MiB = 58.107421875 GiB (the run's log printed "Available KV cache memory: 58.11 GiB").
    assert figs["KV memory"]["logged"] == 29_751 * 2 / 1024
    assert figs["GPU blocks"]["logged"] == 29_751
    assert figs["block size"]["logged"] == figs["block size"]["predicted"] == 16
    assert abs(figs["GPU blocks"]["error_pct"]) <= 1


def test_blocks_30_percent_off_exit_1() -> None:
    text = (DATA / "vllm-0.19.0-llama31-8b-h100.metrics").read_text()
    routes = {
        "/metrics": (text.replace('num_gpu_blocks="29751"', 'num_gpu_blocks="20826"'), "text/plain"),  # 0.7 x
        "/v1/models": ((DATA / "vllm-0.19.0-llama31-8b-h100.models.json").read_text(), "application/json"),
        "/version": ((DATA / "vllm-0.19.0.version.json").read_text(), "application/json"),
    }
    with serving(routes) as url:
        code, out, err = probe(url, "--gpu", "h100", "--json")
        table_code, table, _ = probe(url, "--gpu", "h100")
    assert code == 1 and table_code == 1, err
    figs = figures(out)
    assert figs["GPU blocks"]["logged"] == 20_826
    assert figs["GPU blocks"]["error_pct"] > 40  # ~29,750 predicted: +43% over 20,826
    assert json.loads(out)["pass"] is False
    assert "off" in table and "served" in table


def test_vllm_0_33_capacity_labels() -> None:
    routes = _routes(
        "vllm-0.33.0-llama31-8b.metrics", "vllm-0.19.0-llama31-8b-h100.models.json", "vllm-0.33.0.version.json"
    )
    with serving(routes) as url:
        code, out, err = probe(url, "--json")  # no --gpu: only the figures the served blocks decide
    assert code == 0, err + out
    figs = figures(out)
    # get_kv_cache_capacity@0.33.0: concurrency = 29,751 blocks / (8,192 / 16 = 512 blocks per request)
    # = 58.107421875, tokens = int(58.107421875 x 8,192) = 476,016.
    assert figs["pool tokens"]["logged"] == figs["pool tokens"]["predicted"] == 476_016
    assert figs["max concurrency"]["predicted"] == 58.11
    assert "GPU blocks" not in figs
    assert any("--gpu" in n for n in json.loads(out)["notes"])


def test_older_release_labels_v0_cpu_blocks() -> None:
    # aibrix's capture of a V0 server (no /version there): Qwen2.5-Coder-1.5B-Instruct, whose dimensions are
    # Qwen2.5-1.5B-Instruct's (28 layers, 2 KV heads, head 128, bf16). One block: 16 x 28 x 2 x (128 + 128) x 2 B
    # = 458,752 B; V0's num_cpu_blocks = 4,294,967,296 // 458,752 = 9,362 (worker.py determine_num_available_blocks).
    routes = _routes("aibrix-vllm-v0-qwen25-coder-1.5b.metrics", "aibrix-vllm-v0-qwen25-coder-1.5b.models.json", None)
    with serving(routes) as url:
        code, out, err = probe(url, "--config", "Qwen/Qwen2.5-1.5B-Instruct", "--engine-version", "0.8.5", "--json")
    assert code == 0, err + out
    figs = figures(out)
    assert figs["CPU blocks"]["logged"] == figs["CPU blocks"]["predicted"] == 9_362
    assert figs["block size"]["predicted"] == 16


def test_release_older_than_kvsize_reads_exit_2() -> None:
    routes = _routes("aibrix-vllm-v0-qwen25-coder-1.5b.metrics", "aibrix-vllm-v0-qwen25-coder-1.5b.models.json", None)
    routes["/version"] = ('{"version": "0.7.0"}', "application/json")
    with serving(routes) as url:
        code, _, err = probe(url, "--config", "Qwen/Qwen2.5-1.5B-Instruct")
    assert code == 2 and err.count("\n") == 1, err


def test_unreachable_exit_3() -> None:
    with socket.socket() as sock:  # a port nothing listens on: bound, then closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _, err = probe(f"http://127.0.0.1:{port}", "--timeout", "2")
    assert code == 3 and err.startswith("Error: cannot reach") and err.count("\n") == 1, err


def test_not_an_engine_exit_2() -> None:
    with serving(
        {"/": ("<html>hello</html>", "text/html"), "/metrics": ("process_cpu_seconds_total 1.0\n", "text/plain")}
    ) as url:
        code, _, err = probe(url)
    assert code == 2 and "serves no engine" in err and err.count("\n") == 1, err


def test_bad_url_exit_2() -> None:
    code, _, err = probe("ftp://127.0.0.1:1")
    assert code == 2 and err.count("\n") == 1, err


def test_save_calibration_from_a_vllm_server(tmp_path: Path) -> None:
    """A server's /metrics gives the pool, not the overheads' parts: the calibration holds their sum, the card's
    share ceil(visible x 0.95) minus kvsize's weights minus the served 29,751 x 2 MiB. The run's own log
    (tests/data/logs/llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log) printed torch peak 1.89 GiB + non-torch
    0.25 GiB = 2.14 GiB beside measured weights of 14.99 GiB; kvsize's weights are 16,060,522,496 B = 14.957 GiB,
    0.033 GiB less, which the sum absorbs: about 2.17 GiB (the log's figures are rounded to 0.01 GiB)."""
    import yaml

    routes = _routes(
        "vllm-0.19.0-llama31-8b-h100.metrics", "vllm-0.19.0-llama31-8b-h100.models.json", "vllm-0.19.0.version.json"
    )
    target = tmp_path / "cal.yaml"
    with serving(routes) as url:
        code, _, err = probe(url, "--gpu", "h100", "--save-calibration", str(target))
        assert code == 2 and "tensor-parallel size (--tp)" in err and not target.exists(), err
        code, _, err = probe(url, "--gpu", "h100", "--tp", "1", "--save-calibration", str(target))
        assert code == 0, err
        saved = yaml.safe_load(target.read_text())
        assert target.read_text().startswith("# kvsize calibration: overheads a running server measured (kvsize probe")
        assert (saved["model"], saved["gpu"], saved["engine"], saved["engine_version"], saved["tp"]) == (
            "meta-llama/Llama-3.1-8B-Instruct",
            "h100-sxm",
            "vllm",
            "0.19.0",
            1,
        )
        assert saved["weights_per_rank_bytes"] == 16_060_522_496
        assert saved["activation_bytes"] is saved["non_torch_bytes"] is saved["cuda_graph_bytes"] is None
        assert 2.12 * GIB <= saved["overhead_bytes"] <= 2.22 * GIB
        # Applied to the deployment it measured, it predicts the served blocks exactly.
        code, out, err = probe(url, "--gpu", "h100", "--tp", "1", "--calibration", str(target), "--json")
    assert code == 0, err
    assert figures(out)["GPU blocks"]["predicted"] == 29_751
    # ... and the sizing command's pool is the run's "GPU KV cache size: 476,016 tokens" (29,751 x 16).
    result = runner.invoke(
        app,
        [
            "meta-llama/Llama-3.1-8B-Instruct",
            "--gpu",
            "h100",
            "--ctx",
            "8192",
            "--engine-version",
            "0.19.0",
            "--gpu-util",
            "0.95",
            "--calibration",
            str(target),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["scenarios"][0]["gpu"]["kv_pool_tokens"] == 476_016
    assert any("measured as one figure" in note for note in data["notes"])


def test_save_calibration_refused_for_a_given_kv_memory(tmp_path: Path) -> None:
    text = (DATA / "vllm-0.19.0-llama31-8b-h100.metrics").read_text()
    routes = _routes(
        "vllm-0.19.0-llama31-8b-h100.metrics", "vllm-0.19.0-llama31-8b-h100.models.json", "vllm-0.19.0.version.json"
    )
    routes["/metrics"] = (
        text.replace('kv_cache_memory_bytes="None"', 'kv_cache_memory_bytes="62393024512"'),
        "text/plain",
    )
    with serving(routes) as url:
        code, _, err = probe(url, "--gpu", "h100", "--tp", "1", "--save-calibration", str(tmp_path / "cal.yaml"))
    assert code == 2 and "--kv-cache-memory-bytes" in err and not (tmp_path / "cal.yaml").exists(), err


def test_save_calibration_refused_when_the_card_cannot_hold_the_blocks(tmp_path: Path) -> None:
    # 29,751 blocks of 2 MiB (58.1 GiB) do not fit an L4's 22 GiB: the server does not run on that card.
    routes = _routes(
        "vllm-0.19.0-llama31-8b-h100.metrics", "vllm-0.19.0-llama31-8b-h100.models.json", "vllm-0.19.0.version.json"
    )
    with serving(routes) as url:
        code, _, err = probe(url, "--gpu", "l4", "--tp", "1", "--save-calibration", str(tmp_path / "cal.yaml"))
    assert code == 2 and "does not run on this card" in err and not (tmp_path / "cal.yaml").exists(), err


def test_a_calibration_with_both_the_sum_and_its_parts_is_refused(tmp_path: Path) -> None:
    import pytest

    from kvsize.calibration import read_calibration
    from kvsize.errors import UsageError

    path = tmp_path / "cal.yaml"
    path.write_text(
        "kvsize_calibration: 1\nmodel: m/x\ngpu: h100-sxm\nengine_version: 0.19.0\n"
        "overhead_bytes: 100\nactivation_bytes: 50\n"
    )
    with pytest.raises(UsageError, match="overhead_bytes .* and activation_bytes both given"):
        read_calibration(str(path))


def test_a_malformed_url_is_bad_input_not_unreachable() -> None:
    import pytest

    from kvsize.cli.probe import base_url
    from kvsize.errors import UsageError

    for url in ("not a url", "http://host:8000/\x07", "ftp://host", "http://"):
        with pytest.raises(UsageError, match="is not an http"):
            base_url(url)
    assert base_url("localhost:8000/v1/") == "http://localhost:8000"
