"""Reliability of kvsize's input and output (issue 9, "Hangs and memory" and "Tracebacks"): every file is stat'ed
before it is read, the hub fails fast and in one line, and output that cannot be written is exit 3.

Most cases run `python -m kvsize` as a real process, since the file system, the terminal or the exit code is the
point; a timeout bounds each. The hub cases talk to a local stand-in (tests/hub_standin.py): a loopback HTTP
server started and stopped by the `hub` fixture, with HF_ENDPOINT pointed at it. conftest.py forces
HF_HUB_OFFLINE=1 for every test; only the subprocess environment of the hub tests drops it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hub_standin import COMMIT, HUGE_SIZE, StandInHub, running_hub
from tiny_configs import TINY

from kvsize.errors import ConfigError, EnvironmentProblem, ModelNotFound, UsageError

LLAMA_8B = "meta-llama/Llama-3.1-8B"
ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60  # per process: interpreter start-up on a loaded 2-core machine included
CAPACITY = """deployments:
  - name: {name}
    model: {model}
    gpu: h100
    require:
      ctx: 4096
      min_concurrency: 1
"""


def base_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KVSIZE_DEBUG", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN") and "PROXY" not in k.upper()
    }
    env.update(HF_HUB_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(Path(__file__).parents[1]))
    env.update(extra)
    return env


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT, **kw: Any
) -> subprocess.CompletedProcess[str]:
    kw.setdefault("capture_output", True)
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args], text=True, timeout=timeout, env=env or base_env(), check=False, **kw
    )


def one_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The error contract: the exit code, no traceback, exactly one stderr line starting 'Error: '."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr[-2000:]
    return lines[0]


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- size before reading: FIFOs, devices, oversized files --------------------------------------------------


def test_check_dev_zero_is_refused_before_reading() -> None:
    # /dev/zero once grew a read() until MemoryError: a character device is never opened for reading.
    line = one_error(run("check", "/dev/zero", timeout=30), 2)
    assert "device" in line


def test_check_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "capacity.yaml"
    os.mkfifo(fifo)  # nobody writes: an open() for reading would block forever
    line = one_error(run("check", str(fifo), timeout=30), 2)
    assert "named pipe" in line


def test_config_fifo_and_folder_with_fifo_config(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.json")
    assert "named pipe" in one_error(run(str(tmp_path / "config.json"), timeout=30), 2)
    assert "named pipe" in one_error(run(str(tmp_path), timeout=30), 2)


def test_fifo_safetensors_in_a_model_folder_does_not_hang(tmp_path: Path) -> None:
    write_json(tmp_path / "config.json", TINY)
    os.mkfifo(tmp_path / "model.safetensors")  # read for the weights' size when a GPU is given
    line = one_error(run(str(tmp_path), "--ctx", "4k", "--gpu", "h100", timeout=30), 2)
    assert "model.safetensors" in line and "named pipe" in line


def test_oversized_safetensors_index_is_not_read_whole(tmp_path: Path) -> None:
    write_json(tmp_path / "config.json", TINY)
    index = tmp_path / "model.safetensors.index.json"
    with index.open("wb") as fh:  # sparse: 1 GiB on paper, nothing on disk
        fh.truncate(1 << 30)
    line = one_error(run(str(tmp_path), "--ctx", "4k", "--gpu", "h100", timeout=30), 2)
    assert "too large" in line and "safetensors index" in line


def test_safe_io_reads_regular_files_and_refuses_the_rest(tmp_path: Path) -> None:
    from kvsize.safe_io import read_prefix, read_small_file

    path = tmp_path / "f.json"
    path.write_bytes(b"0123456789")
    assert read_small_file(path, max_bytes=10, what="file") == b"0123456789"
    assert read_prefix(path, size=4, offset=3, what="file") == b"3456"
    with pytest.raises(ConfigError, match="too large"):
        read_small_file(path, max_bytes=9, what="file")
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")  # judged by its target
    with pytest.raises(ConfigError, match="device"):
        read_small_file(link, max_bytes=10, what="file")
    with pytest.raises(ConfigError, match="folder"):
        read_small_file(tmp_path, max_bytes=10, what="file")
    with pytest.raises(ConfigError, match="cannot read it"):
        read_small_file(tmp_path / "missing", max_bytes=10, what="file")


def test_unreadable_model_folder_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A permission error while opening a config is exit 2 with the reason (as root, chmod cannot deny it, so
    the open itself is made to fail)."""
    from kvsize import safe_io
    from kvsize.resolve import load_model_config

    write_json(tmp_path / "config.json", TINY)

    def denied(*args: Any, **kwargs: Any) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(safe_io.os, "open", denied)
    with pytest.raises(ConfigError, match="Permission denied") as info:
        load_model_config(str(tmp_path))
    assert info.value.exit_code == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder")
def test_model_folder_without_permission_is_exit_2(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    write_json(folder / "config.json", TINY)
    folder.chmod(0)
    try:
        one_error(run(str(folder), timeout=30), 2)
    finally:
        folder.chmod(0o755)


def _cache_with_config(home: Path, repo: str, make: Any) -> None:
    """The HF cache layout huggingface_hub reads offline: refs/main -> snapshot; `make(path)` creates the
    snapshot's config.json (a FIFO, a link to /dev/zero)."""
    folder = home / "hub" / ("models--" + repo.replace("/", "--"))
    snapshot = folder / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT)
    make(snapshot / "config.json")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_cached_hub_config_that_is_no_regular_file(tmp_path: Path, kind: str) -> None:
    home = tmp_path / "hf"
    if kind == "fifo":
        _cache_with_config(home, "someorg/cached", os.mkfifo)
    else:
        _cache_with_config(home, "someorg/cached", lambda p: p.symlink_to("/dev/zero"))
    line = one_error(run("someorg/cached", env=base_env(HF_HOME=str(home)), timeout=30), 2)
    assert ("named pipe" if kind == "fifo" else "device") in line


# --- verify: refused before allocating -----------------------------------------------------------------


def _plan(*, device: str, **options: Any) -> Any:
    from kvsize.resolve import load_model_config
    from kvsize.verify import VerifyOptions, plan

    return plan(load_model_config(LLAMA_8B), VerifyOptions(**options), device)  # type: ignore[arg-type]


def test_verify_cpu_guard_counts_the_layers_really_built() -> None:
    # --layers beyond the model's 32 builds all of them: the 8B model is refused on the CPU, as without --layers.
    with pytest.raises(UsageError, match=r"all 32 layers .* 8\.0B"):
        _plan(device="cpu", layers=1_000_000_000)
    assert _plan(device="cpu", layers=2).spec.num_layers == 2


@pytest.mark.parametrize(
    ("device", "options"),
    [
        ("cpu", {"layers": 2, "contexts": (1 << 20,)}),  # --ctx 1M
        ("cpu", {"layers": 2, "batches": (100_000,)}),  # --batch 100000 at the CPU's default ctx 256
        ("meta", {"contexts": (1 << 40,)}),  # --ctx 2**40: 2**80 attention scores, past torch's int64 sizes
    ],
)
def test_verify_runs_too_large_are_refused_before_allocating(device: str, options: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match="too large|needs over"):
        _plan(device=device, **options)


def test_verify_cli_layers_beyond_the_model_on_cpu() -> None:
    pytest.importorskip("torch")
    line = one_error(run("verify", LLAMA_8B, "--device", "cpu", "--layers", "1000000000", timeout=120), 2)
    assert "--layers" in line


# --- output: exit 3 when it cannot be written, glyphs that degrade ------------------------------------------


@pytest.mark.parametrize("args", [[LLAMA_8B, "--ctx", "4k"], [LLAMA_8B, "--ctx", "4k", "--json"], ["gpus"], ["models"]])
def test_full_disk_is_exit_3(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = run(*args, stdout=full, stderr=subprocess.PIPE, capture_output=False)
    assert "No space left" in one_error(proc, 3)


def test_closed_stdout_is_exit_3() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kvsize", LLAMA_8B, "--ctx", "4k"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=base_env(),
        timeout=TIMEOUT,
        preexec_fn=lambda: os.close(1),  # the `>&-` of a shell
        check=False,
    )
    assert "closed" in one_error(proc, 3)


@pytest.mark.parametrize(
    "args",
    [["models"], [LLAMA_8B, "--ctx", "4k", "--json"], ["--help"], ["gpus"], ["check", "examples/capacity.yaml"]],
)
def test_reader_gone_is_silent_exit_141(args: list[str]) -> None:
    """A pipe whose reader has gone stopped reading on purpose: nothing on stderr, and exit 141 (128 + SIGPIPE,
    as a shell reports `cat` or `grep` there), not click's exit 1 ('the check failed' here) nor exit 3."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = run(*args, stdout=write_end, stderr=subprocess.PIPE, capture_output=False, cwd=ROOT)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


@pytest.mark.parametrize("command", ["kvsize --help | head -3", "kvsize gpus | head -1"])
def test_head_in_a_shell_pipe_prints_no_error(command: str) -> None:
    # head may exit before or after kvsize has written everything (the pipe buffers 64 KiB): exit 0 or 141,
    # and never a word on stderr either way.
    line = command.replace("kvsize", f"{sys.executable} -m kvsize")
    proc = subprocess.run(
        ["sh", "-c", line], capture_output=True, text=True, env=base_env(), cwd=ROOT, timeout=TIMEOUT, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip()  # the pipe's status is head's
    assert proc.stderr == ""


def test_file_size_limit_while_writing_is_exit_3(tmp_path: Path) -> None:
    def limit() -> None:  # RLIMIT_FSIZE: writes past 100 bytes fail with EFBIG (its signal ignored)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    with (tmp_path / "out.txt").open("w") as out:
        proc = run(LLAMA_8B, "--ctx", "4k", stdout=out, stderr=subprocess.PIPE, capture_output=False, preexec_fn=limit)
    one_error(proc, 3)


@pytest.mark.parametrize(
    "env", [{"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"}, {"LANG": "C", "LC_ALL": "C"}]
)
def test_narrow_encodings_degrade_glyphs(env: dict[str, str]) -> None:
    proc = run(LLAMA_8B, "--ctx", "4k", "--gpu", "h100", env=base_env(**env))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "fits" in proc.stdout
    if env.get("PYTHONIOENCODING") == "ascii":
        assert proc.stdout.isascii() and "#" in proc.stdout  # the bars' blocks became '#'


def test_non_utf8_path_is_escaped_in_json(tmp_path: Path) -> None:
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/model-\xff"))
    write_json(folder / "config.json", TINY)
    proc = run(str(folder), "--ctx", "4k", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)  # valid JSON, hence valid UTF-8
    assert data["model"].endswith("model-\\xff")
    # 4 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 16,384 B per token; 4096 tokens: 67,108,864 B.
    assert data["scenarios"][0]["kv_cache_bytes"] == 16_384 * 4096


def test_degrade_handler_maps_glyphs_and_escapes_the_rest() -> None:
    from kvsize.cli.streams import ERROR_HANDLER

    assert "█ ░ ┃ … × é \udcff".encode("ascii", ERROR_HANDLER) == b"# . | ... x \\xe9 \\xff"


# --- --plot paths -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("missing/x.png", "does not exist"),
        ("folder.png", "is a folder"),
        ("/dev/full", ".png or .svg"),
        ("fifo.png", "not a regular file"),
        ("~nosuchuser-kvsize/x.png", "cannot expand"),
    ],
)
def test_plot_path_errors_are_one_line(tmp_path: Path, target: str, needle: str) -> None:
    (tmp_path / "folder.png").mkdir()
    os.mkfifo(tmp_path / "fifo.png")
    path = target if target.startswith(("/", "~")) else str(tmp_path / target)
    line = one_error(run(LLAMA_8B, "--ctx", "4k", "--plot", path, timeout=30), 2)
    assert needle in line


def test_plot_expands_home(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    proc = run(LLAMA_8B, "--ctx", "4k", "--plot", "~/chart.svg", env=base_env(HOME=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "chart.svg").read_bytes().startswith(b"<?xml")
    assert not Path("~").exists()


# --- the hub: ids, transport errors, a local stand-in -------------------------------------------------------


@pytest.mark.parametrize("repo_id", ["acme/a--b", "acme/name.git", "name-", "acmé/x", "acme/x..y"])
def test_ids_huggingface_hub_refuses_are_exit_2(repo_id: str) -> None:
    from kvsize.hub import check_repo_id

    with pytest.raises(ModelNotFound, match="valid hub id") as info:
        check_repo_id(repo_id)
    assert info.value.exit_code == 2


def test_id_huggingface_hub_refuses_cli() -> None:
    assert "valid hub id" in one_error(run("acmé/x", timeout=30), 2)  # no traceback from the client's validator


def test_transport_errors_are_matched_by_type_hierarchy() -> None:
    """A transport error class the client may add later (a subclass of its base) is exit 3, found by
    inheritance from the client huggingface_hub really uses, not by its module's name."""
    from kvsize.hub import hub_errors, transport_error_types

    bases = [t for t in transport_error_types() if t not in (OSError, TimeoutError)]
    assert bases, "the HTTP client's error bases were not found"
    future_error = type("FutureProtocolError", (bases[-1],), {"__module__": "some_future_client._errors"})
    with pytest.raises(EnvironmentProblem, match="FutureProtocolError") as info, hub_errors("acme/x", "config.json"):
        raise future_error("garbage")
    assert info.value.exit_code == 3
    with pytest.raises(KeyError), hub_errors("acme/x", "config.json"):  # a bug stays a bug
        raise KeyError("x")


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[StandInHub]:
    with running_hub() as server:
        yield server


def hub_env(hub: StandInHub, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = base_env(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1", **extra)
    env.pop("HF_HUB_OFFLINE")  # this process only: the test talks to the loopback stand-in
    return env


def test_hub_success_path(hub: StandInHub, tmp_path: Path) -> None:
    proc = run("standin/ok", "--ctx", "4k", "--gpu", "h100", "--json", env=hub_env(hub, tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    scenario = data["scenarios"][0]
    # Stand-in config: 2 (K, V) x 4 layers x 2 KV heads x 64 x 2 B = 2,048 B per token; 4096 tokens: 8 MiB.
    assert scenario["kv_cache_bytes"] == 2048 * 4096
    # The stand-in's safetensors header: one BF16 tensor of 1,000 x 1,000 = 2,000,000 B of weights.
    assert scenario["gpu"]["weights_bytes"] == 2_000_000
    assert ("HEAD", "/standin/ok/resolve/main/config.json") in hub.requests


@pytest.mark.parametrize(
    ("repo", "code", "needle"),
    [
        ("standin/missing", 2, "no model 'standin/missing'"),
        ("standin/gated", 3, "gated"),
        ("standin/forbidden", 3, "403"),
        ("standin/huge", 2, f"{HUGE_SIZE:,} bytes"),
        ("standin/garbage", 3, "cannot reach"),
        ("standin/reset", 3, "cannot reach"),
    ],
)
def test_hub_failures_are_one_line(hub: StandInHub, tmp_path: Path, repo: str, code: int, needle: str) -> None:
    started = time.monotonic()
    line = one_error(run(repo, env=hub_env(hub, tmp_path), timeout=30), code)
    assert needle in line
    assert time.monotonic() - started < 20
    if repo == "standin/huge":  # refused on the size the hub reported: never downloaded
        assert not [r for r in hub.requests if r[0] == "GET" and "config.json" in r[1]]


def test_slow_hub_fails_within_the_timeout(hub: StandInHub, tmp_path: Path) -> None:
    started = time.monotonic()
    proc = run("standin/slow", env=hub_env(hub, tmp_path, HF_HUB_ETAG_TIMEOUT="1"), timeout=30)
    elapsed = time.monotonic() - started
    assert "cannot reach" in one_error(proc, 3)
    assert elapsed < 10, elapsed  # one 1 s timeout (plus start-up), not ~24 s of retries


def test_unreachable_hub_fails_fast(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a loopback port with nobody listening: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = base_env(HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HOME=str(tmp_path / "hf"))
    env.pop("HF_HUB_OFFLINE")
    started = time.monotonic()
    line = one_error(run("someorg/somemodel", env=env, timeout=30), 3)
    assert "cannot reach" in line and time.monotonic() - started < 10


@pytest.mark.parametrize("command", ["size", "plan", "check"])
def test_repo_with_only_pytorch_model_bin(hub: StandInHub, tmp_path: Path, command: str) -> None:
    """No safetensors on the hub: the weights are counted from the config, and the output says why."""
    env = hub_env(hub, tmp_path)
    if command == "size":
        proc = run("standin/binonly", "--ctx", "4k", "--gpu", "h100", env=env)
        assert "hub safetensors metadata unavailable" in " ".join(proc.stdout.split())
    elif command == "plan":
        proc = run("plan", "standin/binonly", "--ctx", "4k", env=env)
    else:
        capacity = tmp_path / "capacity.yaml"
        capacity.write_text(CAPACITY.format(name="binonly", model="standin/binonly"))
        proc = run("check", str(capacity), env=env)
    assert proc.returncode == 0, (proc.stdout[-1000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    heads = [r for r in hub.requests if r == ("HEAD", "/standin/binonly/resolve/main/model.safetensors")]
    assert len(heads) == 1  # asked once per process, even by plan's many GPUs


def test_spinner_only_on_a_terminal(hub: StandInHub, tmp_path: Path) -> None:
    import pty

    env = hub_env(hub, tmp_path, HF_HUB_ETAG_TIMEOUT="1")
    piped = run("standin/slow", env=env, timeout=30)
    assert "\r" not in piped.stderr
    main, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kvsize", "standin/slow"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env=env,
            timeout=30,
            check=False,
        )
        os.close(secondary)
        drawn = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other side is closed: all read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(main)
    assert proc.returncode == 3
    assert b"\r" in drawn and b"fetching standin/slow config.json" in drawn


@pytest.mark.parametrize(
    ("variable", "value", "needle"),
    [
        ("HF_ENDPOINT", "http://[::1", "cannot start"),  # huggingface_hub's import itself fails on it
        ("HF_ENDPOINT", "ftp://127.0.0.1:9", "UnsupportedProtocol"),  # the client's transport error, by its base
        ("HF_HUB_ETAG_TIMEOUT", "abc", "cannot start"),
        ("HF_HOME", "/dev/null", "Hugging Face cache"),
    ],
)
def test_unusable_hub_environment_is_exit_3(tmp_path: Path, variable: str, value: str, needle: str) -> None:
    env = base_env(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"))
    env.pop("HF_HUB_OFFLINE")
    env[variable] = value
    assert needle in one_error(run("someorg/somemodel", env=env, timeout=30), 3)


@pytest.mark.parametrize("model", ["x" * 300, "~nosuchuser-kvsize/config.json", "./" + "y" * 300 + ".json"])
def test_capacity_file_model_the_file_system_refuses(tmp_path: Path, model: str) -> None:
    # Found by the property test: a 300-character name made `exists()` raise ENAMETOOLONG (a traceback). A model
    # that cannot be loaded fails its own deployment (exit 1, "the check failed"), with the reason in the table.
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY.format(name="a", model=json.dumps(model)))
    proc = run("check", str(capacity), timeout=30)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-2000:])
    assert "cannot be loaded" in " ".join(proc.stdout.split())
