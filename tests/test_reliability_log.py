"""Reliability of `kvsize log` on hostile, broken and failed-start-up logs.

- Linear-time parsing: pathological 200 KB logs (one huge line of digits, spaces, '=', repeated fragments; many
  lines that repeat a pattern's opening) get an answer; a fuzz over mutated real logs (tests/data/logs) never
  raises anything but a KvsizeError, never hangs, and never lets a non-finite figure through.
- Numbers in a log ('.', '1.2.3', a 400-digit run, 'abc', inf, nan, 1e999) are left out with a note, never a
  traceback.
- A failed start-up (vLLM's negative "Available KV cache memory", "No available memory for the cache blocks")
  is exit 1, whatever the figures before it say.
- --json is strict JSON: an error against a logged 0 is null, and the figure still fails.
- A FIFO or a device as the log is refused without blocking; standard input is read as bytes, capped, and
  decoded (odd bytes noted, binary refused).
- --save-calibration never overwrites the log it reads, and an empty path is refused.

Where the stream, the file or the exit code is the point, the case runs `python -m kvsize log` as a real process
with a timeout (the only bound: nothing here times anything).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from test_reliability_io import one_error
from typer.testing import CliRunner

from kvsize.calibration import Deployment, check_log
from kvsize.cli import log as log_cli
from kvsize.cli.app import app
from kvsize.config import parse_config
from kvsize.engine_log import MAX_LINE_CHARS, EngineLog, parse_log
from kvsize.engines.context import Device
from kvsize.errors import KvsizeError
from kvsize.profiles import resolve_gpu
from kvsize.registry import find_entry, load_registry_config

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "data" / "logs"  # the corpus test_log_corpus.py reads (manifest.json: sources)
CORPUS = sorted(LOGS.glob("*.log"))
# llm-d-planner accuracy sweep, vLLM 0.19.0, Llama-3.1-8B-Instruct on one H100 (as in test_log_command.py)
LLAMA_H100 = LOGS / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log"
LLAMACPP = LOGS / "llamacpp-cuda-phi3-mini.log"
TIMEOUT = 20  # per process: the bound on a pathological log (was: no answer in 40 s)
BIG = "9" * 400


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KVSIZE_DEBUG", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), COLUMNS="160")
    return env


def kvsize_log(*args: str, stdin: bytes | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kvsize", "log", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=base_env(),
        check=False,
    )
    # Decoded here: stdin goes in as bytes, whatever it holds.
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    )


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode in (0, 1, 2), (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-2000:]
    if proc.returncode == 2:
        one_error(proc, 2)


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: Infinity, -Infinity and NaN refused."""

    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def finite_log(log: EngineLog) -> None:
    """No figure or numeric setting that the arithmetic could overflow on."""
    for name, value in log.figures.items():
        assert isinstance(value, (int, float)) and math.isfinite(value), (name, value)
    for name, value in {**log.settings, **log.hparams}.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert math.isfinite(value) and abs(value) < 10**16, (name, value)
    for cache in log.caches:
        assert all(math.isfinite(v) for v in (cache.size_mib, cache.k_mib, cache.v_mib)), cache


# --- 1. linear-time parsing ---------------------------------------------------------------------------------

SIZE = 200_000
VLLM_HEAD = "INFO vLLM API server version 0.11.0\n"


def repeated(line: str, head: str = "") -> str:
    """`head`, then `line` on as many lines as make SIZE characters."""
    return head + (line + "\n") * (SIZE // (len(line) + 1) + 1)


PATHOLOGICAL: dict[str, str] = {
    # One 200,000-character line (cut to MAX_LINE_CHARS before matching). Before: the config dump's `\w+=` tried
    # at every digit or letter ("digits", "words": no answer in minutes), the lazy `Load weight end\..*?` from
    # every repeat ("load-weight": 50 s).
    "digits": "INFO Initializing a V1 LLM engine (v0.11.0) with config: " + "1" * SIZE,
    "words": "[2025] server_args=ServerArgs(" + "a" * SIZE,
    "spaces": VLLM_HEAD + "Available KV cache memory:" + " " * SIZE,
    "equals": "[2025] server_args=ServerArgs(" + "=" * SIZE,
    "gib-fragments": VLLM_HEAD + "Model loading took " + "1.0 Gi" * (SIZE // 6 + 1),
    "load-weight": "Load weight end. " * (SIZE // 17 + 1),
    # Lines just under the cap, so that the patterns themselves meet them.
    "load-weight-lines": repeated("Load weight end. " * 460),
    "kv-pairs-lines": repeated("server_args=ServerArgs(" + "a" * 4000 + " b='" * 400),
    "figure-lines": repeated(("Available KV cache memory: " + "1" * 600 + " ") * 12, head=VLLM_HEAD),
    "dict-lines": repeated("INFO non-default args: " + "{" * 7000, head=VLLM_HEAD),
    "cache-lines": repeated("llama_kv_cache: size = " + "1" * 7000),
    "number-lines": repeated("print_info: n_layer = " + "1," * 3000),
}


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_pathological_log_gets_an_answer(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.log"
    path.write_text(PATHOLOGICAL[name], encoding="utf-8")
    assert path.stat().st_size >= SIZE
    no_traceback(kvsize_log(str(path), "--gpu", "h100"))  # subprocess.TimeoutExpired past TIMEOUT


def test_long_line_is_cut_with_a_note() -> None:
    text = LLAMA_H100.read_text()
    log = parse_log("x" * (3 * MAX_LINE_CHARS) + "\n" + text)
    assert log is not None and log.figures["available_kv_gib"] == 58.11
    assert any("longer than 8 KiB" in note for note in log.notes), log.notes


def test_cut_never_splits_a_number() -> None:
    # A figure that straddles the cap is dropped, not read as its first digits.
    line = "x" * (MAX_LINE_CHARS - 40) + " Available KV cache memory: 58.11111111111111111111111111111111 GiB"
    log = parse_log(VLLM_HEAD + line + "\n")
    assert log is not None and "available_kv_gib" not in log.figures


# --- the fuzz: mutated real logs ------------------------------------------------------------------------------

BAD_NUMBERS = [".", "1.2.3", BIG, "1" * 5000, "inf", "nan", "-nan", "1e999", "-3.21", "0", "0.00", "-0", "", "abc"]
LONG_RUNS = ["1", " ", "=", "GiB", "1.0 GiB", "a", "Load weight end. ", "a='", "{", "\r", "\x00", "(", "#", ","]
PER_INPUT_S = 10  # generous on a loaded 2-core machine: a mutated log parses in milliseconds


class TooSlow(Exception):
    pass


@pytest.fixture
def alarm() -> Iterator[Callable[[float], None]]:
    """arm(seconds): raise TooSlow in the main thread unless disarmed (arm(0)) in time."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise TooSlow

    previous = signal.signal(signal.SIGALRM, on_alarm)

    def arm(seconds: float) -> None:
        signal.setitimer(signal.ITIMER_REAL, seconds)

    try:
        yield arm
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def mutate(rng: random.Random, texts: list[str]) -> str:
    """One to four of: splice two logs, repeat a line, truncate anywhere, insert random bytes (decoded as a log
    would be), put a bad number in place of a logged one or of every number on a line, insert a long run, join
    or split lines."""
    text = rng.choice(texts)
    for _ in range(rng.randint(1, 4)):
        op, at = rng.randrange(8), rng.randint(0, len(text))
        if op == 0:
            other = rng.choice(texts)
            start = rng.randint(0, len(other))
            text = text[:at] + other[start : start + rng.randint(0, 20_000)]
        elif op == 1:
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            lines[i : i + 1] = [lines[i]] * rng.randint(2, 300)
            text = "\n".join(lines)
        elif op == 2:
            text = text[:at]
        elif op == 3:
            noise = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            text = text[:at] + noise.decode("utf-8", "replace") + text[at:]
        elif op == 4:
            numbers = list(re.finditer(r"\d[\d.,]*", text))
            if numbers:
                m = rng.choice(numbers)
                text = text[: m.start()] + rng.choice(BAD_NUMBERS) + text[m.end() :]
        elif op == 5:
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            lines[i] = re.sub(r"\d[\d.,]*", rng.choice([*BAD_NUMBERS, "0", "1"]), lines[i])
            text = "\n".join(lines)
        elif op == 6:
            text = text[:at] + rng.choice(LONG_RUNS) * rng.randint(1, 50_000 // 3) + text[at:]
        else:
            text = text.replace("\n", " ", rng.randint(1, 50)) if rng.random() < 0.5 else text[:at] + "\n" + text[at:]
    return text[:400_000]


@pytest.fixture(scope="module")
def deployments() -> list[Deployment]:
    """check_log with nothing given, and with a model, a card and weights (the arithmetic runs)."""
    spec = parse_config(load_registry_config(find_entry("meta-llama/Llama-3.1-8B-Instruct")))  # type: ignore[arg-type]
    h100 = resolve_gpu("h100")
    full = Deployment(
        spec=spec, memory_bytes=h100.memory_bytes, device=Device.from_profile(h100), weights_bytes=16_060_522_496
    )
    return [Deployment(), full]


def fuzz(count: int, seed: int, deployments: list[Deployment], arm: Callable[[float], None]) -> None:
    texts = [p.read_text(encoding="utf-8") for p in CORPUS]
    rng = random.Random(seed)
    for i in range(count):
        text = mutate(rng, texts)
        where = f"seed {seed}, input {i} ({len(text):,} chars)"
        arm(PER_INPUT_S)
        try:
            log = parse_log(text)
            if log is not None:
                finite_log(log)
                for dep in deployments:
                    with contextlib.suppress(KvsizeError):  # bad input, said in one line: allowed
                        check_log(log, dep)
        except TooSlow:
            pytest.fail(f"{where}: no answer in {PER_INPUT_S} s")
        except KvsizeError:
            pass
        except Exception as exc:  # anything else is a traceback for the user
            raise AssertionError(f"{where}: {type(exc).__name__}: {exc}") from exc
        finally:
            arm(0)


def test_fuzz_mutated_logs(deployments: list[Deployment], alarm: Callable[[float], None]) -> None:
    assert len(CORPUS) >= 40
    fuzz(200, seed=1, deployments=deployments, arm=alarm)


@pytest.mark.slow
def test_fuzz_mutated_logs_long(deployments: list[Deployment], alarm: Callable[[float], None]) -> None:
    fuzz(5000, seed=2, deployments=deployments, arm=alarm)


# --- 2. numbers in a log --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [".", "1.2.3", BIG, "inf", "nan", "1e999", "abc", "1" * 5000])
def test_bad_figure_is_left_out_with_a_note(value: str) -> None:
    text = LLAMA_H100.read_text()
    text = text.replace("Available KV cache memory: 58.11 GiB", f"Available KV cache memory: {value} GiB")
    text = text.replace("GPU KV cache size: 476,016 tokens", f"GPU KV cache size: {value} tokens")
    text = text.replace("Model loading took 14.99 GiB", f"Model loading took {value} GiB")
    log = parse_log(text)
    assert log is not None
    finite_log(log)
    assert not {"available_kv_gib", "pool_tokens", "weights_gib"} & log.figures.keys(), log.figures
    if len(value) <= 512:  # longer runs are no match at all: nothing to note
        assert any("available_kv_gib left out" in note for note in log.notes), log.notes
    assert log.failure is None


@pytest.mark.parametrize(
    "literal", ["1e999", "-1e999", "float('nan')", "'abc'", "[1]", BIG, "1" * 5000, "True", "{[1]: 2}"]
)
def test_bad_values_in_vllm_arguments(literal: str) -> None:
    text = (
        "INFO vLLM API server version 0.11.0\n"
        f"INFO non-default args: {{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'gpu_memory_utilization': {literal}, "
        f"'max_model_len': {literal}, 'tensor_parallel_size': {literal}, 'block_size': {literal}}}\n"
        f"INFO Initializing a V1 LLM engine (v0.11.0) with config: model='m', max_seq_len={literal}, "
        f"tensor_parallel_size={literal}\n"
    )
    log = parse_log(text)
    assert log is not None
    finite_log(log)
    fraction = log.settings.get("gpu_memory_utilization")
    assert fraction is None or 0 < fraction <= 1


def test_bad_numbers_in_every_engine_never_traceback(tmp_path: Path) -> None:
    logs = {
        "sglang": "server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', mem_fraction_static=abc, "
        f"tp_size={BIG}, page_size=nan, context_length=inf)\n"
        "KV Cache is allocated. #tokens: 444500, K size: 1e999 GB, V size: nan GB\nmax_total_num_tokens=.\n",
        "llamacpp": f"print_info: n_layer = {BIG}\nprint_info: n_head_kv = 8\nprint_info: n_embd_head_k = 128\n"
        "print_info: n_embd_head_v = 128\nllama_context: n_ctx = 99999999999999999999\n"
        "llama_kv_cache: size = 1.2.3 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): inf MiB, V (f16): . MiB\n",
        "trtllm": f"[TensorRT-LLM] Allocate {BIG} bytes for k/v cache.\n"
        "[TensorRT-LLM] Using 0 tokens in paged KV cache.\n"
        "[TensorRT-LLM][MemUsageChange] Allocated nan GiB for max tokens in paged KV cache (1e999).\n",
    }
    for engine, text in logs.items():
        log = parse_log(text)
        assert log is not None and log.engine == engine
        finite_log(log)
        path = tmp_path / f"{engine}.log"
        path.write_text(text)
        proc = kvsize_log(str(path), "--config", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100")
        no_traceback(proc)


def test_mem_fraction_static_abc_is_noted(tmp_path: Path) -> None:
    # SGLang's ServerArgs dump with a value float() refuses: before, a ValueError traceback.
    text = (
        "[2025] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', mem_fraction_static=abc)\n"
        "[2025] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB\n[2025] max_total_num_tokens=444500\n"
    )
    log = parse_log(text)
    assert log is not None and "mem_fraction_static" not in log.settings
    assert any("mem_fraction_static left out" in note for note in log.notes)
    path = tmp_path / "sglang.log"
    path.write_text(text)
    proc = kvsize_log(str(path), "--gpu", "h100", "--json")
    no_traceback(proc)
    assert proc.returncode in (0, 1)
    assert any("mem_fraction_static" in note for note in strict_json(proc.stdout)["notes"])


# --- 3. failed start-ups, and logs with nothing to compare ------------------------------------------------------

NEGATIVE_KV = """\
INFO 10-01 12:00:00 [__init__.py:216] Automatically detected platform cuda.
INFO 10-01 12:00:05 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: \
model='meta-llama/Llama-3.1-8B-Instruct', max_seq_len=131072, tensor_parallel_size=1
INFO 10-01 12:00:30 [gpu_model_runner.py:2602] Model loading took 14.99 GiB and 5.1 seconds
INFO 10-01 12:00:40 [gpu_worker.py:298] Available KV cache memory: -3.21 GiB
ERROR 10-01 12:00:40 [core.py:708] EngineCore failed to start.
ERROR 10-01 12:00:40 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing \
`gpu_memory_utilization` when initializing the engine.
"""


def test_negative_kv_memory_is_a_failed_start_up(tmp_path: Path) -> None:
    path = tmp_path / "vllm-failed.log"
    path.write_text(NEGATIVE_KV)
    log = parse_log(NEGATIVE_KV)
    assert log is not None and log.failure is not None and "available_kv_gib" not in log.figures
    proc = kvsize_log(str(path), "--gpu", "h100")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "start-up failed" in proc.stdout and "no memory for the KV cache" in proc.stdout
    assert "-3.21 GiB" in proc.stdout and "Traceback" not in proc.stderr
    proc = kvsize_log(str(path), "--gpu", "h100", "--json")
    data = strict_json(proc.stdout)
    assert proc.returncode == 1 and data["pass"] is False
    assert "no memory for the KV cache" in data["startup_failed"]
    # The weights before the failure still agree with kvsize: the failure alone decides.
    assert [f["name"] for f in data["figures"]] == ["weights per rank"]


def test_engine_error_without_the_negative_figure(tmp_path: Path) -> None:
    text = LLAMA_H100.read_text().split("Available KV cache memory")[0]
    text += "\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.\n"
    path = tmp_path / "vllm-failed.log"
    path.write_text(text)
    proc = kvsize_log(str(path), "--gpu", "h100", "--json")
    assert proc.returncode == 1 and strict_json(proc.stdout)["startup_failed"]


def test_failed_start_up_writes_no_calibration(tmp_path: Path) -> None:
    path, cal = tmp_path / "vllm-failed.log", tmp_path / "cal.yaml"
    path.write_text(NEGATIVE_KV)
    proc = kvsize_log(str(path), "--gpu", "h100", "--save-calibration", str(cal))
    assert proc.returncode == 1 and not cal.exists()
    assert "nothing written" in proc.stdout


def test_other_engines_failures() -> None:
    sglang = "server_args=ServerArgs(model_path='x')\nRuntimeError: Not enough memory. Please try to increase "
    sglang += "--mem-fraction-static.\n"
    llamacpp = "print_info: n_layer = 32\nllama_init_from_model: failed to initialize the context: failed to "
    llamacpp += "allocate buffer for kv cache\n"
    for text in (sglang, llamacpp):
        log = parse_log(text)
        assert log is not None and log.failure is not None, text


def test_a_failed_attempt_anywhere_in_the_log_counts() -> None:
    # vllm-project/vllm#10517 quotes three start-ups, the second refused ("max seq len (29000) is larger than the
    # maximum number of tokens that can be stored in KV cache"): the log shows a failed start-up.
    log = parse_log((LOGS / "vllm-10517-rtx3090-llama31-8b.log").read_text())
    assert log is not None and log.failure is not None and "29000" in log.failure
    assert log.figures["gpu_blocks"] == 1952  # the figures are still the first start-up's


def test_no_kv_figure_is_said(tmp_path: Path) -> None:
    # Cut after "Model loading took": only the weights compare. Exit 0 (they agree), but the note says the KV
    # cache, the point of the check, was not compared.
    lines = LLAMA_H100.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "Model loading took" in line)
    path = tmp_path / "cut.log"
    path.write_text("\n".join(lines[: cut + 1]) + "\n")
    proc = kvsize_log(str(path), "--gpu", "h100", "--json")
    assert proc.returncode == 0, proc.stderr
    data = strict_json(proc.stdout)
    assert any("no KV cache figure compared" in note for note in data["notes"]), data["notes"]


def test_nothing_to_compare_writes_no_calibration(tmp_path: Path) -> None:
    # A model kvsize cannot look up (offline): no figure predicted, exit 2; before, the calibration was written
    # first and the command then failed.
    text = LLAMA_H100.read_text().replace("meta-llama/Llama-3.1-8B-Instruct", "someorg/not-a-model")
    path, cal = tmp_path / "other.log", tmp_path / "cal.yaml"
    path.write_text(text)
    line = one_error(kvsize_log(str(path), "--gpu", "h100", "--save-calibration", str(cal)), 2)
    assert "nothing in" in line and not cal.exists()


# --- 4. strict JSON -------------------------------------------------------------------------------------------


def test_json_has_no_infinity(tmp_path: Path) -> None:
    # A logged 0.00 MiB cache against a predicted 0.5 MiB: the error is infinite. null in the JSON, still failing.
    text = (
        "print_info: n_layer = 2\nprint_info: n_head_kv = 2\nprint_info: n_embd_head_k = 64\n"
        "print_info: n_embd_head_v = 64\nllama_context: n_ctx = 512\n"
        "llama_kv_cache: size =    0.00 MiB (   512 cells,   2 layers,  1/1 seqs), K (f16):    0.00 MiB, "
        "V (f16):    0.00 MiB\n"
    )
    path = tmp_path / "zero.log"
    path.write_text(text)
    proc = kvsize_log(str(path), "--json")
    assert proc.returncode == 1, proc.stderr
    data = strict_json(proc.stdout)
    size = next(f for f in data["figures"] if f["name"] == "KV cache size")
    assert size["logged"] == 0 and size["error_pct"] is None and data["pass"] is False
    table = kvsize_log(str(path))
    assert table.returncode == 1 and "n/a" in table.stdout and "outside" in table.stdout


@pytest.mark.parametrize("value", ["inf", "nan", "-1"])
def test_tolerance_must_be_finite(value: str) -> None:
    # --tolerance inf would pass an infinite error.
    one_error(kvsize_log(str(LLAMACPP), "--tolerance", value), 2)


def test_log_text_is_not_rich_markup(tmp_path: Path) -> None:
    # A model name from the log with markup in it: printed as written, not a MarkupError traceback.
    text = LLAMACPP.read_text()
    text = re.sub(r"general\.name += [^\n]*", "general.name     = [/]bad[red]name", text)
    path = tmp_path / "markup.log"
    path.write_text(text)
    proc = kvsize_log(str(path))
    no_traceback(proc)
    assert "[/]bad[red]name" in proc.stdout


# --- 5. what the log is read from ---------------------------------------------------------------------------


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    line = one_error(kvsize_log(str(fifo)), 2)  # no writer ever opens it: a blocking open() would time out
    assert "FIFO" in line


def test_device_is_refused() -> None:
    line = one_error(kvsize_log("/dev/zero"), 2)
    assert "device" in line


def test_log_over_the_cap_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "huge.log"
    with big.open("wb") as fh:  # sparse: refused from its size, never read
        fh.truncate(log_cli.MAX_LOG_BYTES + 1)
    line = one_error(kvsize_log(str(big)), 2)
    assert "too large" in line


def test_standard_input_not_utf8_is_one_line() -> None:
    noise = random.Random(5).randbytes(20_000)
    line = one_error(kvsize_log("-", stdin=noise), 2)
    assert "not a text log" in line


def test_standard_input_with_odd_bytes_is_read() -> None:
    # A real log with a few undecodable bytes (a progress bar cut mid-character): read, with a note.
    data = LLAMA_H100.read_bytes().replace(b"Automatically", b"\xff\xfeAutomatically", 1) + b"\xe2\x96\n"
    proc = kvsize_log("-", "--gpu", "h100", "--json", stdin=data)
    assert proc.returncode == 0, proc.stderr
    data_out = strict_json(proc.stdout)
    assert any("not UTF-8" in note for note in data_out["notes"]), data_out["notes"]
    assert any(f["name"] == "pool tokens" for f in data_out["figures"])


def test_utf16_capture_is_decoded(tmp_path: Path) -> None:
    # PowerShell's `> vllm.log` writes UTF-16 with a byte-order mark.
    path = tmp_path / "ps.log"
    path.write_bytes(LLAMA_H100.read_text().encode("utf-16"))
    proc = kvsize_log(str(path), "--gpu", "h100", "--json")
    assert proc.returncode == 0, proc.stderr
    assert any(f["name"] == "pool tokens" for f in strict_json(proc.stdout)["figures"])


def test_compressed_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log.gz"
    path.write_bytes(gzip.compress(LLAMA_H100.read_bytes()))
    assert "compressed" in one_error(kvsize_log(str(path)), 2)


def test_standard_input_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    # In-process with a small cap: the stream is read in bounded chunks and refused one byte past the cap.
    monkeypatch.setattr(log_cli, "MAX_LOG_BYTES", 4096)
    result = CliRunner().invoke(app, ["log", "-"], input=b"x" * 10_000)
    assert result.exit_code == 2 and result.stderr.startswith("Error: standard input is over")
    assert result.stderr.count("\n") == 1


# --- 6. --save-calibration and the log ----------------------------------------------------------------------


def test_save_calibration_onto_the_log_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(LLAMA_H100.read_bytes())
    (tmp_path / "sub").mkdir()
    hard = tmp_path / "hard.log"
    os.link(log, hard)
    soft = tmp_path / "soft.log"
    soft.symlink_to(log)
    for target in (str(log), str(tmp_path / "sub" / ".." / "vllm.log"), str(hard), str(soft)):
        line = one_error(kvsize_log(str(log), "--gpu", "h100", "--save-calibration", target), 2)
        assert "is also an input of this run" in line, target
    assert log.read_bytes() == LLAMA_H100.read_bytes()


def test_save_calibration_onto_standard_input_is_refused(tmp_path: Path) -> None:
    # `kvsize log - < vllm.log --save-calibration vllm.log`: standard input is that very file.
    log = tmp_path / "vllm.log"
    log.write_bytes(LLAMA_H100.read_bytes())
    with log.open("rb") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "kvsize", "log", "-", "--gpu", "h100", "--save-calibration", str(log)],
            stdin=fh,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=base_env(),
            check=False,
        )
    assert "overwrite the log" in one_error(proc, 2)
    assert log.read_bytes() == LLAMA_H100.read_bytes()


def test_save_calibration_same_path_before_it_exists(tmp_path: Path) -> None:
    path = str(tmp_path / "new.log")
    line = one_error(kvsize_log(path, "--save-calibration", path), 2)
    assert "is also an input of this run" in line


def test_save_calibration_empty_path_is_refused() -> None:
    line = one_error(kvsize_log(str(LLAMA_H100), "--gpu", "h100", "--save-calibration", ""), 2)
    assert "empty path" in line


def test_save_calibration_elsewhere_still_writes(tmp_path: Path) -> None:
    cal = tmp_path / "cal.yaml"
    proc = kvsize_log(str(LLAMA_H100), "--gpu", "h100", "--save-calibration", str(cal))
    assert proc.returncode == 0, proc.stderr
    assert "kvsize_calibration: 1" in cal.read_text()
