"""The CLI's contract as a property (issue 9, "Done when"): for any argv drawn from a grammar of commands, options
and hostile values, and any config.json or capacity file drawn from a mutation strategy, `kvsize`

- ends within a time limit, under a memory limit;
- exits 0, 1, 2 or 3 (never an uncaught exception, which typer reports as exit 1 = "the check failed");
- never prints a traceback;
- when it exits 2, prints exactly one `Error:` line on stderr.

The examples run in-process through typer's CliRunner, under an interval timer and a lowered RLIMIT_AS soft limit
(restored after each example); a few fixed hostile inputs also run as real processes under RLIMIT_AS.

Counts: CI runs FAST_EXAMPLES per test (a few seconds). The slow job draws many more:

    KVSIZE_FUZZ_EXAMPLES=2000 python -m pytest tests/test_property_cli.py -m slow

(`-m slow` selects only the slow tests; the default run skips them through pyproject's addopts.)
`kvsize verify` is left out: it imports torch and builds models, seconds per example.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_configs import TINY
from typer.testing import CliRunner

from kvsize.cli import app

FAST_EXAMPLES = 12
SLOW_EXAMPLES = int(os.environ.get("KVSIZE_FUZZ_EXAMPLES", "300"))
TIME_LIMIT_S = 20  # one invocation, a loaded 2-core CI machine included
MEMORY_LIMIT = 3 * 1024**3  # headroom over the test process's own address space

runner = CliRunner()

# --- the grammar ------------------------------------------------------------------------------------------

HOSTILE_VALUES = [
    "",
    " ",
    "0",
    "-1",
    "-0",
    "+5",
    "1",
    "7",
    "1.5",
    "0.5",
    "1e309",
    "-1e309",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "9" * 400,
    "9" * 5000,
    "1" + "0" * 30,
    "2**40",
    "0x10",
    "1_000",
    "٢٤",
    "٢٤GiB",
    "²",
    "1k",
    "128k",
    "1M",
    "1G",
    "1T",
    "8k,32k",
    "8k,,32k",
    ",",
    "1,1,1,1,1,1,1,1",
    "24GiB",
    "80GB",
    "0GiB",
    "-5GiB",
    "1e400GiB",
    "1.5KiB",
    "0.92",
    "1.0",
    "1.01",
    "auto",
    "bf16",
    "fp8",
    "fp8,bf16",
    "int4",
    "nvfp4",
    "q4_0",
    "float8_e4m3fn",
    "vllm",
    "all",
    "sglang",
    "trtllm",
    "llamacpp",
    "hf",
    "formula",
    "h100",
    "H100",
    "a100-80gb",
    "mi300x",
    "nope",
    "\x1b[31mred",
    "a\tb",
    "x" * 300,
    "../../etc/passwd",
    "main",
    "..",
    "a/../b",
    "~",
    "-",
    "--",
    "null",
    "true",
]
OPTIONS = [
    "--ctx",
    "--batch",
    "--kv-dtype",
    "--engine",
    "--engine-version",
    "--tp",
    "--pp",
    "--block-size",
    "--max-num-batched-tokens",
    "--gpu",
    "--gpu-mem",
    "--gpu-util",
    "--kv-memory",
    "--reserve",
    "--weights-mem",
    "--weights-dtype",
    "--cpu-mem",
    "--link-bandwidth",
    "--encoder-len",
    "--revision",
]
PLAN_OPTIONS = ["--ctx", "--concurrency", "--engine", "--kv-dtype", "--gpu-util", "--weights-dtype", "--tp"]
FLAGS = ["--json", "--help"]
MODELS = [
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen3-8B",
    "deepseek-ai/DeepSeek-V3",
    "acme/a--b",
    "acmé/x",
    "name.git",
    "/dev/zero",
    "/dev/null",
    "",
    ".",
    "..",
    "/",
    "-",
    "x" * 500,
    "{config}",
    "{folder}",
    "{fifo}",
]

PLOT_TARGETS = [
    "{tmp}/chart.png",
    "{tmp}/missing/chart.png",
    "{tmp}",
    "{fifo}",
    "/dev/full",
    "/dev/null.png",
    "~nosuchuser-kvsize/x.svg",
    "{tmp}/chart.gif",
    "{tmp}/chart.svg",
]
option_values = st.one_of(st.sampled_from(HOSTILE_VALUES), st.text(max_size=12), st.integers(-(2**70), 2**70).map(str))


@st.composite
def option_pairs(draw: st.DrawFn, names: list[str]) -> list[str]:
    out: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        name, value = draw(st.sampled_from(names)), draw(option_values)
        out += [f"{name}={value}"] if draw(st.booleans()) else [name, value]
    if names is OPTIONS and draw(st.integers(0, 5)) == 0:
        out += ["--plot", draw(st.sampled_from(PLOT_TARGETS))]
    out += draw(st.lists(st.sampled_from(FLAGS), max_size=1))
    return out


# --- config.json mutations --------------------------------------------------------------------------------

EXTRA_KEYS = [
    "sliding_window",
    "layer_types",
    "head_dim",
    "quantization_config",
    "text_config",
    "rope_scaling",
    "num_local_experts",
    "kv_lora_rank",
    "model_type",
    "architectures",
    "attention_chunk_size",
    "is_encoder_decoder",
    "auto_map",
    "tie_word_embeddings",
]
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([0, -1, 1, 2**31, 10**30, 100_001]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    config = dict(TINY)
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from([*TINY, *EXTRA_KEYS]))
        if draw(st.integers(0, 4)) == 0:
            config.pop(key, None)
        else:
            config[key] = draw(json_values)
    return config


def _json_text(config: dict[str, Any]) -> str:
    import json

    return json.dumps(config, allow_nan=True)


# --- capacity file mutations ------------------------------------------------------------------------------

DEPLOYMENT: dict[str, Any] = {
    "name": "chat",
    "model": "meta-llama/Llama-3.1-8B",
    "gpu": "h100",
    "tp": 1,
    "engine": "vllm",
    "kv_dtype": "auto",
    "gpu_util": 0.9,
    "require": {"ctx": 8192, "min_concurrency": 4},
}
CAPACITY_KEYS = [
    "name",
    "model",
    "gpu",
    "gpu_mem",
    "tp",
    "pp",
    "gpus",
    "engine",
    "engine_version",
    "kv_dtype",
    "gpu_util",
    "kv_memory",
    "max_batched_tokens",
    "block_size",
    "weights_mem",
    "weights_dtype",
    "revision",
    "require",
    "bogus",
]
REQUIRE_KEYS = ["ctx", "batch", "min_concurrency", "max_kv_fraction", "max_context", "min_pool_tokens"]
YAML_TOKENS = [
    "!!int abc",
    "!!float x",
    "2001-13-45",
    "!!python/object:os.system",
    "&a [*a]",
    "*nope",
    "{",
    "[",
    "'",
    '"',
    "|",
    ">",
    "~",
    "null",
    "1" * 5000,
    "0x" + "f" * 40,
    ".inf",
    "-.nan",
    "1e400",
    "- - -",
    "\x07",
    "\t",
    "@",
    "`",
    "%YAML 1.1",
    "? x",
    "!<tag:yaml.org,2002:int> 5",
    "1_0",
    "0o17",
    "+1",
]


@st.composite
def capacity_texts(draw: st.DrawFn) -> str:
    deployments = []
    for _ in range(draw(st.integers(1, 2))):
        deployment = {**DEPLOYMENT, "require": dict(DEPLOYMENT["require"])}
        for _ in range(draw(st.integers(0, 3))):
            key = draw(st.sampled_from(CAPACITY_KEYS))
            pool = [*MODELS, *HOSTILE_VALUES] if key == "model" else HOSTILE_VALUES  # local paths, FIFOs too
            deployment[key] = draw(st.one_of(json_values, st.sampled_from(pool)))
        if isinstance(deployment.get("require"), dict) and draw(st.booleans()):
            deployment["require"][draw(st.sampled_from(REQUIRE_KEYS))] = draw(
                st.one_of(json_values, st.sampled_from(HOSTILE_VALUES))
            )
        deployments.append(deployment)
    try:
        text = yaml.safe_dump({"deployments": deployments}, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, ValueError):
        text = yaml.safe_dump({"deployments": [DEPLOYMENT]})
    lines = text.splitlines()
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.integers(0, len(lines) - 1))
        action = draw(st.integers(0, 3))
        if action == 0:  # a duplicate key (or a duplicated list item)
            lines.insert(where, lines[where])
        elif action == 1 and ":" in lines[where]:  # a value replaced by a YAML token
            head = lines[where].split(":", 1)[0]
            lines[where] = f"{head}: {draw(st.sampled_from(YAML_TOKENS))}"
        elif action == 2:
            lines[where] = lines[where][: draw(st.integers(0, len(lines[where])))]
        else:
            lines.insert(where, draw(st.sampled_from(YAML_TOKENS)))
    return "\n".join(lines) + "\n"


# --- running one example ----------------------------------------------------------------------------------


class TooSlow(Exception):
    pass


@contextlib.contextmanager
def limits(seconds: float, memory: int) -> Iterator[None]:
    """An interval timer and a lower soft RLIMIT_AS for the duration of one in-process invocation."""

    def expire(signum: int, frame: Any) -> None:
        raise TooSlow(f"no answer within {seconds} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    previous = signal.signal(signal.SIGALRM, expire)
    used = _address_space()
    if used is not None:
        cap = used + memory if hard == resource.RLIM_INFINITY else min(used + memory, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int | None:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def materialize(argv: list[str], folder: Path, config: dict[str, Any]) -> list[str]:
    (folder / "model").mkdir(exist_ok=True)
    config_path = folder / "model" / "config.json"
    config_path.write_text(_json_text(config), encoding="utf-8")
    fifo = folder / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    names = {"{config}": str(config_path), "{folder}": str(folder / "model"), "{fifo}": str(fifo)}
    return [names.get(arg, arg).replace("{tmp}", str(folder)) for arg in argv]


def assert_contract(argv: list[str]) -> None:
    try:
        with limits(TIME_LIMIT_S, MEMORY_LIMIT):
            result = runner.invoke(app, argv)
    except TooSlow:
        pytest.fail(f"no answer within {TIME_LIMIT_S} s: {argv!r}")
    where = f"argv={argv!r}\nstdout={result.stdout[-800:]!r}\nstderr={result.stderr[-2000:]!r}"
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{type(exc).__name__}: {exc}\n{where}"
    assert not isinstance(exc, MemoryError), where
    assert result.exit_code in (0, 1, 2, 3), where
    assert "Traceback" not in result.stdout + result.stderr, where
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and len(result.stderr.splitlines()) == 1, where


@st.composite
def size_argv(draw: st.DrawFn) -> list[str]:
    model = draw(st.sampled_from(MODELS))
    return [model, *draw(option_pairs(OPTIONS))] if not model.startswith("-") else ["size", "--", model]


@st.composite
def any_argv(draw: st.DrawFn) -> list[str]:
    kind = draw(st.sampled_from(["size", "size", "plan", "check", "listing"]))
    if kind == "size":
        return draw(size_argv())
    if kind == "plan":
        return ["plan", draw(st.sampled_from(MODELS)), *draw(option_pairs(PLAN_OPTIONS))]
    if kind == "check":
        return ["check", "{capacity}", *draw(st.lists(st.sampled_from(["--json", "--junit={junit}"]), max_size=2))]
    return [draw(st.sampled_from(["gpus", "models", "schema"])), *draw(st.lists(st.sampled_from(FLAGS), max_size=1))]


def one_example(argv: list[str], config: dict[str, Any], capacity: str) -> None:
    with tempfile.TemporaryDirectory(prefix="kvsize-prop-") as tmp:
        folder = Path(tmp)
        materialize([], folder, config)  # the model folder and the FIFO a capacity file may name
        for name, target in (("{config}", "model/config.json"), ("{folder}", "model"), ("{fifo}", "fifo.json")):
            capacity = capacity.replace(name, str(folder / target))
        (folder / "capacity.yaml").write_text(capacity, encoding="utf-8")
        names = {"{capacity}": str(folder / "capacity.yaml"), "--junit={junit}": f"--junit={folder / 'out.xml'}"}
        argv = [names.get(arg, arg) for arg in materialize(argv, folder, config)]
        assert_contract(argv)


SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "database": None}
# CI draws the same examples on every run (derandomize); the slow job draws fresh ones.
FAST = settings(max_examples=FAST_EXAMPLES, derandomize=True, **SETTINGS)  # type: ignore[arg-type]
SLOW = settings(max_examples=SLOW_EXAMPLES, **SETTINGS)  # type: ignore[arg-type]


@FAST
@given(argv=any_argv(), config=mutated_configs(), capacity=capacity_texts())
def test_cli_contract(argv: list[str], config: dict[str, Any], capacity: str) -> None:
    one_example(argv, config, capacity)


@FAST
@given(config=mutated_configs(), options=option_pairs(OPTIONS))
def test_cli_contract_on_mutated_configs(config: dict[str, Any], options: list[str]) -> None:
    one_example(["{config}", "--gpu", "h100", *options], config, "")


@FAST
@given(capacity=capacity_texts())
def test_check_contract_on_mutated_capacity_files(capacity: str) -> None:
    one_example(["check", "{capacity}"], TINY, capacity)


@pytest.mark.slow
@SLOW
@given(argv=any_argv(), config=mutated_configs(), capacity=capacity_texts())
def test_cli_contract_slow(argv: list[str], config: dict[str, Any], capacity: str) -> None:
    one_example(argv, config, capacity)


@pytest.mark.slow
@SLOW
@given(config=mutated_configs(), options=option_pairs(OPTIONS))
def test_cli_contract_on_mutated_configs_slow(config: dict[str, Any], options: list[str]) -> None:
    one_example(["{config}", "--gpu", "h100", *options], config, "")


@pytest.mark.slow
@SLOW
@given(capacity=capacity_texts())
def test_check_contract_on_mutated_capacity_files_slow(capacity: str) -> None:
    one_example(["check", "{capacity}"], TINY, capacity)


# --- a few real processes under RLIMIT_AS -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "/dev/zero"],
        ["/dev/zero"],
        ["{fifo}"],
        ["meta-llama/Llama-3.1-8B", "--ctx", "9" * 5000],
        ["meta-llama/Llama-3.1-8B", "--link-bandwidth", "1e309", "--gpu", "h100"],
    ],
)
def test_contract_as_a_process_under_a_memory_limit(argv: list[str], tmp_path: Path) -> None:
    argv = materialize(argv, tmp_path, TINY)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, resource.RLIM_INFINITY))

    env = {k: v for k, v in os.environ.items() if k != "KVSIZE_DEBUG"}
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    proc = subprocess.run(
        [sys.executable, "-m", "kvsize", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        preexec_fn=limit,
        check=False,
    )
    assert proc.returncode in (0, 1, 2, 3) and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if proc.returncode == 2:
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("Error:"), proc.stderr


HF_VARIABLES = [
    "HF_ENDPOINT",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "HF_TOKEN",
    "HF_HUB_DISABLE_TELEMETRY",
]
ENV_VALUES = [
    "",
    "0",
    "1",
    "-5",
    "abc",
    "1e309",
    "http://[::1",
    "ftp://127.0.0.1:9",
    "http://127.0.0.1:9",
    "http://256.256.256.256",
    "/dev/null",
    "/dev/zero",
    "/etc/passwd",
    "/nonexistent/x",
    "\x01",
    "yes",
]


@pytest.mark.slow
@settings(max_examples=max(10, SLOW_EXAMPLES // 20), **SETTINGS)  # type: ignore[arg-type]
@given(
    env=st.dictionaries(st.sampled_from(HF_VARIABLES), st.sampled_from(ENV_VALUES), min_size=1, max_size=3),
    model=st.sampled_from(["someorg/somemodel", "meta-llama/Llama-3.1-8B"]),
)
def test_contract_under_hostile_hub_environment_slow(env: dict[str, str], model: str) -> None:
    """Real processes (the hub client reads its settings at import) under RLIMIT_AS, only loopback or
    unroutable endpoints, each bounded by the subprocess timeout."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, resource.RLIM_INFINITY))

    base = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "PROXY" not in k.upper()}
    base.update(PYTHONPATH=str(Path(__file__).parents[1]), HF_ENDPOINT="http://127.0.0.1:9", NO_PROXY="*")
    with tempfile.TemporaryDirectory(prefix="kvsize-env-") as home:
        base["HF_HOME"] = home
        base.update(env)
        if not base["HF_ENDPOINT"].startswith(("http://127.", "http://[::1", "ftp://127.", "http://256.")):
            base["HF_ENDPOINT"] = "http://127.0.0.1:9"  # never a real host
        proc = subprocess.run(
            [sys.executable, "-m", "kvsize", model],
            capture_output=True,
            text=True,
            timeout=60,
            env=base,
            preexec_fn=limit,
            check=False,
        )
    assert proc.returncode in (0, 1, 2, 3) and "Traceback" not in proc.stderr, (env, proc.stderr[-2000:])
    if proc.returncode in (2, 3):
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("Error:"), (env, proc.stderr)
