"""An unresponsive hub fails within the documented time (README "Reliability"): one HEAD for config.json,
not retried (huggingface_hub 2.4 file_download.get_hf_file_metadata: retry_on_errors=False), bounded by
HF_HUB_ETAG_TIMEOUT (kvsize's default 5 s); and no telemetry lookup before it (utils/_detect_agent.py
_fetch_registry GETs /api/agent-harnesses with a fixed 3 s timeout, which made the audit's run take 8.9 s).

The stand-in is a loopback listener that accepts connections and never answers. Each run is a subprocess, as
a user runs kvsize, with an empty HF_HOME (no cached config, no cached agent list). The wait is asserted from
below only (at least the timeout: the timeout is what bounds it); what it is not is counted, not timed: one
connection (no telemetry GET, no retry). Past HANG_GUARD_S the run hung. A busy machine's start-up is no
failure."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 60  # no answer by then: kvsize hung (each wait below is a few seconds)


@contextmanager
def silent_listener() -> Iterator[tuple[str, list[socket.socket]]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:  # the 0.2 s poll, or the socket closed
                continue
            accepted.append(conn)  # held open, never read from or written to

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in accepted:
            conn.close()
        server.close()


def run_against_silent_hub(
    tmp_path: Path, extra_env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[str], int]:
    with silent_listener() as (endpoint, accepted):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HF_") and k not in ("DISABLE_TELEMETRY", "DO_NOT_TRACK")
        }
        env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(ROOT), **extra_env)
        start = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "kvsize", "nosuch/model-xyz"],
                env=env,
                capture_output=True,
                text=True,
                timeout=HANG_GUARD_S,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"hung: no answer within {HANG_GUARD_S} s from a silent hub")
        elapsed = time.monotonic() - start
        connections = len(accepted)
    return elapsed, done, connections


def assert_one_line_unreachable(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: cannot reach the Hugging Face Hub for 'nosuch/model-xyz'")
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.slow
def test_unresponsive_hub_fails_within_the_default_timeout(tmp_path: Path) -> None:
    elapsed, done, connections = run_against_silent_hub(tmp_path, {})
    assert_one_line_unreachable(done)
    assert connections == 1  # the HEAD only: no telemetry GET (3 s more, before: 8.9 s in all), no retry
    assert elapsed >= 5.0  # the HEAD waited kvsize's 5 s


def test_unresponsive_hub_fails_within_hf_hub_etag_timeout(tmp_path: Path) -> None:
    elapsed, done, connections = run_against_silent_hub(tmp_path, {"HF_HUB_ETAG_TIMEOUT": "1"})
    assert_one_line_unreachable(done)
    assert connections == 1  # before: 2 (the 3 s telemetry lookup, 4.6 s in all)
    assert elapsed >= 1.0  # the HEAD waited HF_HUB_ETAG_TIMEOUT


@pytest.mark.slow
def test_a_users_telemetry_choice_is_kept(tmp_path: Path) -> None:
    # HF_HUB_DISABLE_TELEMETRY set by the user (here 0: telemetry on): huggingface_hub's agent lookup runs, a
    # second connection, and the wait is its 3 s plus the HEAD's 1 s.
    elapsed, done, connections = run_against_silent_hub(
        tmp_path, {"HF_HUB_ETAG_TIMEOUT": "1", "HF_HUB_DISABLE_TELEMETRY": "0"}
    )
    assert_one_line_unreachable(done)
    assert connections == 2
    assert elapsed >= 4.0
