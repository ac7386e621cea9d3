"""Issue 9 (reliability, round 2): CI gates that cannot be fooled, user text that cannot drive the terminal or
forge a CI annotation, and values that end in one `Error:` line instead of a traceback or a wrong answer.

Each section fixes one cause and tests its variants, not only the input that revealed it: a duplicate key at
any depth, any control character in any printed field, any field of the shared option model. Where the
terminal, the file system or the exit code is the point, the test runs `python -m kvsize` as a real process.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

import kvsize
from kvsize.capacity_file import CheckResult, github_annotations, junit_xml, parse_capacity
from kvsize.cli import app
from kvsize.deployment import DeploymentSettings
from kvsize.errors import ConfigError, KvsizeError, UsageError
from kvsize.text import clean, json_safe, workflow_message, workflow_property
from kvsize.units import parse_revision, parse_size

LLAMA = "meta-llama/Llama-3.1-8B"  # in the built-in registry: works offline
PROCESS_TIMEOUT = 60
runner = CliRunner()

# 4 layers, hidden 4096, 32 heads, 8 KV heads, intermediate 11008, vocab 32000 (untied). Parameters by hand:
#   attention per layer: q 4096*4096 + k 4096*1024 + v 4096*1024 + o 4096*4096 = 41,943,040
#   MLP per layer: 3 * 4096 * 11008 = 135,266,304; two RMSNorms: 2 * 4096 = 8,192 -> 177,217,536 per layer
#   4 layers 708,870,144 + embeddings 32000*4096 + lm_head 32000*4096 (262,144,000) + final norm 4,096
#   = 971,018,240 parameters.
TINY: dict[str, Any] = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
TINY_PARAMS = 971_018_240

# Characters a terminal acts on, or that break a line, an XML file or the reading order.
HOSTILE_CHARS = [
    "\x1b[2J",
    "\x1b]0;pwned\x07",
    "\x9b31m",
    "\x07",
    "\x7f",
    "\x00",
    "\r",
    "\n",
    "\u202e",
    "\u2028",
    "\x85",
    "\ufffe",
]
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffe\uffff]")


# --- helpers ------------------------------------------------------------------------------------------------


def run_process(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`python -m kvsize ARGS` with the test's offline environment; bytes, so escapes are seen as written."""
    base = {k: v for k, v in os.environ.items() if k not in ("KVSIZE_DEBUG", "GITHUB_ACTIONS")}
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args],
        capture_output=True,
        timeout=PROCESS_TIMEOUT,
        cwd=cwd,
        env={**base, "HF_HUB_OFFLINE": "1", **(env or {})},
        check=False,
    )


def process_error(proc: subprocess.CompletedProcess[bytes], exit_code: int = 2) -> str:
    """The error contract for a real process: the exit code, nothing on stdout, one 'Error: ' line."""
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout[-300:], stderr[-1500:])
    assert proc.stdout == b""
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr[-1500:]
    return lines[0]


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def cli_error(result: Result, exit_code: int = 2) -> str:
    assert result.exit_code == exit_code, (result.exit_code, result.stdout[-300:], result.stderr[-1500:])
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def file_error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_capacity(text, source="capacity.yaml")
    return str(info.value)


def deployment(extra: str = "", require: str = "{ctx: 8k}", name: str = "d") -> str:
    return f"deployments:\n  - name: {name}\n    model: {LLAMA}\n    gpu: l4\n{extra}    require: {require}\n"


def write(folder: Path, name: str, data: str | bytes | dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# --- 1. duplicate YAML keys: a second `deployments:` must not drop the first list -----------------------------


def test_duplicate_deployments_key_cannot_hide_a_failing_deployment(tmp_path: Path) -> None:
    # The first list holds a deployment that fails (128k x 64 of an 8B model on one L4); the second one passes.
    # Last-wins loading made `check` exit 0. Now: exit 2, naming the line of the second key.
    text = (
        "deployments:\n  - name: fails\n    model: " + LLAMA + "\n    gpu: l4\n    require: {ctx: 128k, batch: 64}\n"
        "deployments:\n  - name: passes\n    model: " + LLAMA + "\n    gpu: h200\n    require: {ctx: 1k}\n"
    )
    line = process_error(run_process("check", str(write(tmp_path, "c.yaml", text))))
    assert "line 6" in line and "duplicate key 'deployments'" in line and "first given at line 1" in line


DUPLICATES = {
    # name: (file text, the line of the second key)
    "top-level": ("deployments: []\ndeployments: []\n", 2),
    "deployment field": (deployment("    gpu: h100\n"), 5),
    "name twice": ("deployments:\n  - name: a\n    name: b\n    model: m\n    require: {ctx: 8k}\n", 3),
    "require block": (deployment(require="\n      ctx: 8k\n      ctx: 1M"), 7),
    "flow mapping": (deployment(require="{ctx: 8k, batch: 1, ctx: 1M}"), 5),
    "second deployment": (deployment() + "  - name: e\n    model: m\n    model: n\n    require: {ctx: 1k}\n", 8),
    "quoted vs plain": (deployment('    "gpu": h100\n'), 5),
    "int keys 1 and 1": ("deployments: []\nx: {1: a, 1: b}\n", 2),
    "null keys": ("deployments: []\nx: {~: a, null: b}\n", 2),
    "deep nesting": ("a:\n  b:\n    c:\n      d: 1\n      d: 2\ndeployments: []\n", 5),
    "in a sequence of mappings": ("deployments: []\nx:\n  - [ {k: 1, k: 2} ]\n", 3),
}


@pytest.mark.parametrize("name", list(DUPLICATES))
def test_duplicate_keys_at_any_depth(name: str) -> None:
    text, line = DUPLICATES[name]
    message = file_error(text)
    assert "duplicate key" in message and f"line {line}," in message, message


def test_merge_keys_may_be_overridden() -> None:
    # `<<: *base` then an explicit key is YAML's override, not a duplicate.
    text = (
        "base: &b {model: " + LLAMA + ", gpu: h100}\ndeployments:\n  - <<: *b\n    name: d\n    gpu: l4\n"
        "    require: {ctx: 8k}\n"
    )
    with pytest.raises(ConfigError, match="unknown key 'base'"):  # gets past loading: only the schema objects
        parse_capacity(text, source="c.yaml")


_keys = st.from_regex(r"[a-z]{1,6}", fullmatch=True)
_leaf = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "8k", "true"]))
_trees = st.recursive(_leaf, lambda inner: st.dictionaries(_keys, inner, min_size=1, max_size=4), max_leaves=12)


def _dump(tree: Any, indent: int, duplicate_at: list[int], path: list[int]) -> list[str]:
    """Block YAML for `tree`; the mapping at index duplicate_at[0] (in visiting order) repeats its first key."""
    lines: list[str] = []
    if not isinstance(tree, dict):
        return lines
    index = path[0]
    path[0] += 1
    items = list(tree.items())
    if index == duplicate_at[0]:
        items.append(items[0])
    pad = " " * indent
    for key, value in items:
        if isinstance(value, dict):
            lines.append(f"{pad}{key}:")
            lines.extend(_dump(value, indent + 2, duplicate_at, path))
        else:
            lines.append(f"{pad}{key}: {json.dumps(value)}")
    return lines


@settings(max_examples=60, deadline=None)
@given(tree=st.dictionaries(_keys, _trees, min_size=1, max_size=3), which=st.integers(0, 20))
def test_any_duplicate_key_anywhere_is_refused(tree: dict[str, Any], which: int) -> None:
    def count(node: Any) -> int:
        return 1 + sum(count(v) for v in node.values()) if isinstance(node, dict) else 0

    target = which % count(tree)
    lines = _dump(tree, 0, [target], [0])
    message = file_error("\n".join(lines) + "\n")
    assert "duplicate key" in message


# --- 2. one validator for the command line and the capacity file ---------------------------------------------

# field: (option, bad values as text). Each must be refused on the command line AND in a file.
BAD_SETTINGS: dict[str, tuple[str, list[str]]] = {
    "gpu_mem": ("--gpu-mem", ["0", "-1GiB", "0.5", "٢٤GiB", "inf", "nan", "1e309", "2048PiB", "2000000TiB", "lots"]),
    "weights_mem": ("--weights-mem", ["-1000000000000", "0", "-1e12", "1e400GB"]),
    "kv_memory": ("--kv-memory", ["-5", "0", "1" + "0" * 400, "NaN"]),
    "reserve": ("--reserve", ["-1", "١GiB"]),
    "tp": ("--tp", ["0", "10**30", "1" + "0" * 30, "2.5", "-1", "٢", "65537"]),
    "pp": ("--pp", ["0", "1e3", "99999999999999999999999"]),
    "gpu_util": ("--gpu-util", ["0", "1.5", "nan", "inf", "-0.5", "٠.٩", "150%", "0x1"]),
    "block_size": ("--block-size", ["0", "2.5", "-16"]),
    "max_batched_tokens": ("--max-batched-tokens", ["0", "1" + "0" * 400]),
    "encoder_len": ("--encoder-len", ["-1", "1" + "0" * 400, "٢"]),
    "revision": (
        "--revision",
        [
            "../x",
            "a/../../b",
            "-rf",
            "a b",
            "x\x1b[2J",
            "~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a\\b",
            "/a",
            "a/",
            "a.lock",
            ".hidden",
            "@",
            "a@{1}",
            "a//b",
            "a.",
            "",
        ],
    ),
}
BAD_CASES = [(field, value) for field, (_, values) in BAD_SETTINGS.items() for value in values]


@pytest.mark.parametrize(("field", "value"), BAD_CASES, ids=[f"{f}={v[:12]!r}" for f, v in BAD_CASES])
def test_a_value_refused_on_the_command_line_is_refused_in_a_file(field: str, value: str) -> None:
    option = BAD_SETTINGS[field][0]
    line = cli_error(invoke(LLAMA, "--gpu", "l4", "--ctx", "8k", option, value))
    assert option in line or "revision" in line, line
    message = file_error(deployment(f"    {field}: {json.dumps(value)}\n"))
    assert f"field 'deployments.0.{field}'" in message and "line 5" in message, message


# YAML scalars that are not text: `gpu_mem: true` once read as 1 byte, `weights_mem: -1000000000000` passed.
RAW_YAML_VALUES = [
    ("gpu_mem", "true"),
    ("gpu_mem", "false"),
    ("gpu_mem", "-24"),
    ("gpu_mem", ".inf"),
    ("gpu_mem", "[24]"),
    ("weights_mem", "-1000000000000"),
    ("weights_mem", "0"),
    ("weights_mem", "0.4"),
    ("kv_memory", "-1"),
    ("kv_memory", "1" + "0" * 400),
    ("tp", "1" + "0" * 30),
    ("tp", "true"),
    ("tp", "2.0"),
    ("gpus", "0"),
    ("gpu_util", ".nan"),
    ("gpu_util", "true"),
    ("gpu_util", "1.01"),
    ("pp", "-3"),
    ("revision", "1"),
    ("link_bandwidth", ".inf"),
]


@pytest.mark.parametrize(("field", "raw"), RAW_YAML_VALUES, ids=[f"{f}={r[:12]}" for f, r in RAW_YAML_VALUES])
def test_yaml_scalars_are_validated_like_options(field: str, raw: str) -> None:
    extra = "    cpu_mem: 64GiB\n" if field == "link_bandwidth" else ""
    message = file_error(deployment(f"{extra}    {field}: {raw}\n"))
    assert f"deployments.0.{field}" in message, message


def test_negative_weights_cannot_make_a_70b_pass_on_an_l4(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", deployment("    weights_mem: -1000000000000\n"))
    line = process_error(run_process("check", str(path)))
    assert "line 5" in line and "weights_mem" in line


@pytest.mark.parametrize(
    ("extra", "require"),
    [
        ("", "{ctx: 8k, batch: 0}"),
        ("", "{ctx: 8k, batch: true}"),
        ("", "{ctx: " + "9" * 300 + "}"),
        ("", "{ctx: 10**300}"),
        ("", "{ctx: 8k, max_kv_fraction: .nan}"),
        ("", "{ctx: 8k, min_concurrency: -1}"),
        ("", "{ctx: 8k, max_context: 2001-01-01}"),
        ("", "{ctx: 8k, min_pool_tokens: 1e400}"),
    ],
)
def test_requirements_are_bounded(extra: str, require: str) -> None:
    assert "require" in file_error(deployment(extra, require=require))


def test_good_values_read_the_same_from_the_command_line_and_a_file() -> None:
    from_file = parse_capacity(
        deployment("    gpu_mem: 24GiB\n    tp: '2'\n    gpu_util: 90%\n"), source="c"
    ).deployments[0]
    from kvsize.deployment import from_options

    from_cli = from_options(gpu_mem="24GiB", tp="2", gpu_util="90%")
    assert (from_file.gpu_mem, from_file.tp, from_file.gpu_util) == (24 * 1024**3, 2, 0.9)
    assert (from_cli.gpu_mem, from_cli.tp, from_cli.gpu_util) == (from_file.gpu_mem, from_file.tp, from_file.gpu_util)
    assert parse_capacity(deployment("    gpu_mem: 25769803776\n"), source="c").deployments[0].gpu_mem == 24 * 1024**3


def test_every_option_field_is_in_the_capacity_schema() -> None:
    schema = json.loads(invoke("schema").stdout)
    fields = {f.name for f in msgspec.structs.fields(DeploymentSettings)}
    assert fields <= set(schema["$defs"]["Deployment"]["properties"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu_mem": 0},
        {"gpu_mem": True},
        {"gpu_mem": 10**400},
        {"weights_bytes": -(10**12)},
        {"reserve_bytes": -1},
        {"tp": 10**30},
        {"tp": True},
        {"pp": 0},
        {"encoder_len": 10**400},
        {"ctx": 10**300},
        {"batch": 10**300},
        {"engine_options": {"block_size": -1}},
        {"engine_options": {"block_size": True}},
        {"engine_options": {"max_num_batched_tokens": 10**30}},
        {"offload": (10**30, None)},
        {"offload": (1024, -5)},
        {"offload": (1024, 10**400)},
    ],
)
def test_the_python_api_applies_the_same_bounds(kwargs: dict[str, Any]) -> None:
    options: dict[str, Any] = {"ctx": 8192, "gpu": "l4", **kwargs}
    with pytest.raises(UsageError):
        kvsize.estimate(dict(TINY), **options)


# --- 3. unbounded numbers and non-ASCII digits on the command line ----------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--cpu-mem", "64GiB", "--link-bandwidth", "inf"],
        ["--cpu-mem", "64GiB", "--link-bandwidth", "1e309"],
        ["--cpu-mem", "64GiB", "--link-bandwidth", "nan"],
        ["--cpu-mem", "64GiB", "--link-bandwidth", "-64"],
        ["--cpu-mem", "64GiB", "--link-bandwidth", "٦٤"],
        ["--cpu-mem", "64GiB", "--link-bandwidth", "1e-30"],
        ["--encoder-len", "9" * 400],
        ["--gpu-mem", "٢٤GiB"],
        ["--gpu-mem", "２４GiB"],  # fullwidth digits
        ["--ctx", "٢٤k"],
        ["--link-bandwidth", "64"],  # without an offload tier
    ],
    ids=lambda a: " ".join(a)[:40],
)
def test_numbers_are_range_checked_before_arithmetic(tmp_path: Path, args: list[str]) -> None:
    config = write(tmp_path, "config.json", TINY)
    cli_error(invoke(str(config), "--gpu", "l4", "--ctx", "8k", *args))


def test_huge_link_bandwidth_and_encoder_len_as_processes(tmp_path: Path) -> None:
    config = write(tmp_path, "config.json", TINY)
    assert "link bandwidth" in process_error(
        run_process(str(config), "--gpu", "l4", "--cpu-mem", "64GiB", "--link-bandwidth", "inf")
    )
    assert "--encoder-len" in process_error(run_process(str(config), "--encoder-len", "9" * 400))
    assert "--gpu-mem" in process_error(run_process(str(config), "--gpu-mem", "٢٤GiB"))


def test_parse_size_reads_ascii_only() -> None:
    assert parse_size("24GiB") == 24 * 1024**3 and parse_size("1.5TiB") == 3 * 1024**4 // 2
    for digits in ("٢٤", "２４", "𝟐𝟒", "²⁴", "24\u0660"):
        with pytest.raises(UsageError):
            parse_size(digits + "GiB")


# --- 4. YAML values that fail while being built --------------------------------------------------------------

UNBUILDABLE = [
    "2001-13-45",
    "2001-02-30",
    "!!int abc",
    "!!int ''",
    "!!int +",
    "!!float xyz",
    "!!bool maybe",
    "!!timestamp x",
    "!!int 0b2",
    "9" * 5000,
    "!!float ''",
]


@pytest.mark.parametrize("value", UNBUILDABLE, ids=lambda v: v[:20])
def test_values_that_fail_to_build_name_their_line(value: str) -> None:
    message = file_error(deployment(require=f"\n      batch: 1\n      ctx: {value}"))
    assert "line 7" in message and "cannot read the value" in message, message


@pytest.mark.parametrize("value", ["2001-13-45", "!!int abc", "9" * 5000])
def test_unbuildable_values_exit_2_as_a_process(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, "c.yaml", deployment(require=f"{{ctx: {value}}}"))
    assert "line 5" in process_error(run_process("check", str(path)))


def test_object_building_tags_stay_refused() -> None:
    assert "could not determine a constructor" in file_error("deployments: !!python/object/apply:os.system [ls]\n")


# --- 5. terminal escapes, GitHub annotations, JUnit ------------------------------------------------------------


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40))
def test_clean_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    cleaned = clean(text)
    assert UNSAFE.search(cleaned) is None and "\t" not in cleaned and "\n" not in cleaned
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in cleaned)
    if UNSAFE.search(text) is None and not any(0xD800 <= ord(c) <= 0xDFFF or c in "\t\n" for c in text):
        assert cleaned == text  # printable text, non-ASCII letters included, is left alone


def _no_raw_controls(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    found = [c for c in text if c != "\n" and UNSAFE.search(c)]
    assert not found, (found, text[-800:])


@pytest.mark.parametrize("bad", HOSTILE_CHARS, ids=repr)
def test_deployment_names_reach_the_terminal_escaped(tmp_path: Path, bad: str) -> None:
    config = write(tmp_path, "config.json", TINY)
    name = json.dumps(f"ok{bad}name")
    text = f"deployments:\n  - name: {name}\n    model: {config}\n    gpu_mem: 1GiB\n    require: {{ctx: 8k}}\n"
    proc = run_process("check", str(write(tmp_path, "c.yaml", text)), env={"GITHUB_ACTIONS": "true"})
    assert proc.returncode == 1  # 1 GiB cannot hold the 1.8 GiB of weights
    _no_raw_controls(proc.stdout)
    _no_raw_controls(proc.stderr)
    assert b"::error file=" in proc.stderr and len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("bad", ["\x1b[31m", "\x9b2J", "\x07", "\u202e"], ids=repr)
def test_paths_and_errors_reach_the_terminal_escaped(tmp_path: Path, bad: str) -> None:
    folder = tmp_path / f"model{bad}dir"
    write(folder, "config.json", TINY)
    table = run_process(str(folder), "--ctx", "8k")
    assert table.returncode == 0
    _no_raw_controls(table.stdout)
    as_json = run_process(str(folder), "--ctx", "8k", "--json")
    _no_raw_controls(as_json.stdout)
    assert json.loads(as_json.stdout)["model"] == str(folder)  # escaped in the JSON text, not altered
    for args in (
        [f"nope/x{bad}y"],
        [str(folder), "--ctx", f"8{bad}"],
        [str(folder), f"--bogus{bad}"],
        [str(folder), "--kv-dtype", bad],
        [str(tmp_path / f"missing{bad}.json")],
    ):
        proc = run_process(*args)
        assert proc.returncode in (2, 3)
        _no_raw_controls(proc.stderr)
        assert b"\\x" in proc.stderr or b"\\u" in proc.stderr  # visible, not dropped


def test_injected_annotation_cannot_forge_the_file() -> None:
    result = CheckResult(
        name="x,file=/etc/passwd,line=1::injected",
        model="m",
        passed=False,
        reason="r\n::error::x",
        gpu="l4",
        engine="vllm",
        tp=1,
        pp=1,
        replicas=1,
        ctx=1,
        batch=1,
        kv_dtype="bf16",
    )
    (line,) = github_annotations([result], file="dir,x:y/capacity.yaml")
    assert line == (
        "::error file=dir%2Cx%3Ay/capacity.yaml,title=kvsize capacity%3A "
        "x%2Cfile=/etc/passwd%2Cline=1%3A%3Ainjected::r%0A::error::x"
    )


_names = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=30)


@given(name=_names, reason=_names, file=_names)
def test_any_name_gives_one_well_formed_annotation(name: str, reason: str, file: str) -> None:
    result = CheckResult(
        name=name,
        model="m",
        passed=False,
        reason=reason,
        gpu=None,
        engine="vllm",
        tp=1,
        pp=1,
        replicas=1,
        ctx=1,
        batch=1,
        kv_dtype="bf16",
    )
    (line,) = github_annotations([result], file=file)
    match = re.fullmatch(r"::error file=([^,:\r\n]*),title=([^,:\r\n]*)::([^\r\n]*)", line)
    assert match is not None, line
    assert UNSAFE.search(line) is None
    assert match.group(1) == workflow_property(file) and match.group(3) == workflow_message(reason)


@given(name=_names, model=_names, reason=_names)
@settings(max_examples=200)
def test_junit_is_well_formed_whatever_the_names(name: str, model: str, reason: str) -> None:
    result = CheckResult(
        name=name,
        model=model,
        passed=False,
        reason=reason,
        gpu=None,
        engine="vllm",
        tp=1,
        pp=1,
        replicas=1,
        ctx=1,
        batch=1,
        kv_dtype="bf16",
    )
    case = ET.fromstring(junit_xml([result]).encode("utf-8")).find("testcase")
    assert case is not None and case.get("name") == clean(name) and case.get("classname") == clean(model)


def test_junit_file_from_a_hostile_capacity_file(tmp_path: Path) -> None:
    config = write(tmp_path, "config.json", TINY)
    name = json.dumps("a\x00b\x1b[2J\x0bc\ufffe\x85\x7fd")
    text = f"deployments:\n  - name: {name}\n    model: {config}\n    gpu_mem: 1GiB\n    require: {{ctx: 8k}}\n"
    report = tmp_path / "junit.xml"
    proc = run_process("check", str(write(tmp_path, "c.yaml", text)), "--junit", str(report))
    assert proc.returncode == 1
    case = ET.parse(report).getroot().find("testcase")
    assert case is not None and case.get("name") == "a\\x00b\\x1b[2J\\x0bc\\ufffe\\x85\\x7fd"


def test_json_safe_keeps_the_data() -> None:
    data = {"name": "a\x1b[2J\x9b\u202e\u2028b", "list": ["\x85"]}
    text = json.dumps(data, indent=2, ensure_ascii=False)
    safe = json_safe(text)
    assert UNSAFE.search(safe) is None and json.loads(safe) == data


# --- 6. revisions: git ref rules before any cache or network access --------------------------------------------

BAD_REVISIONS = BAD_SETTINGS["revision"][1] + ["..", "a..b", "refs/../x", "x\n", "x\t", "a\x85", "\u2028", "a" * 300]
GOOD_REVISIONS = ["main", "v1.0", "refs/pr/1", "feature/x-y_z", "release-2024.06", "0" * 40, "a1" * 32, "ümlaut"]


@pytest.mark.parametrize("revision", BAD_REVISIONS, ids=repr)
def test_bad_revisions_never_reach_the_hub(monkeypatch: pytest.MonkeyPatch, revision: str) -> None:
    import kvsize.hub

    def no_hub(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(kvsize.hub, "fetch_config_from_hub", no_hub)
    cli_error(invoke("acme/model", "--revision", revision))
    with pytest.raises(KvsizeError):
        kvsize.estimate("acme/model", revision=revision)


@pytest.mark.parametrize("revision", GOOD_REVISIONS)
def test_good_revisions_pass(revision: str) -> None:
    assert parse_revision(revision) == revision


def test_revision_dot_dot_in_a_file_and_as_a_process(tmp_path: Path) -> None:
    assert "revision" in file_error(deployment("    revision: ../../../etc\n"))
    assert "revision" in process_error(run_process("acme/model", "--revision", "../../x"))


# --- 7. weights: per-channel GPTQ, float8 configs, quantization_config as data, safetensors sizes --------------


def _weights(config: dict[str, Any], engine: str = "vllm") -> int:
    fit = kvsize.estimate(config, ctx=8192, gpu="h100", engine=engine).scenarios[0].gpu
    assert fit is not None
    return fit.weights_bytes


def test_gptq_per_channel_sizes_positive() -> None:
    # group_size -1: vLLM GPTQLinearMethod.create_weights uses group_size = input_size, one fp16 scale and one
    # 4-bit zero per output channel: 4 + (16 + 4) / 4096 bits per weight (in-features = hidden_size 4096).
    # GPTQ quantizes the decoder's Linear layers only: embed_tokens and lm_head (2 x 32,000 x 4,096 = 262,144,000
    # params) and the norms (4 layers x 2 x 4,096 + 4,096 = 36,864 params) stay at 2 bytes. Linear params:
    # 708,874,240 - 36,864 = 708,837,376: x 4/8 = 354,418,688, scales x 20/4096/8 = 432,640; + 73,728 (norms)
    # + 524,288,000 = 879,213,056 bytes.
    config = {**TINY, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}}
    assert _weights(config) == 879_213_056
    grouped = {**TINY, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
    # 4 + 20/128 bits: 708,837,376 x 4/8 + 708,837,376 x 20/1024 = 354,418,688 + 13,844,480 = 368,263,168,
    # + 73,728 + 524,288,000 = 892,624,896 bytes; per-channel holds fewer scales.
    assert _weights(grouped) == 892_624_896 > _weights(config)


@pytest.mark.parametrize(
    "dtype", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "torch.float8_e4m3fn"]
)
@pytest.mark.parametrize("key", ["torch_dtype", "dtype"])
def test_float8_configs_size_with_one_byte_weights(dtype: str, key: str) -> None:
    config = {k: v for k, v in TINY.items() if k != "torch_dtype"} | {key: dtype}
    # The checkpoint's own width: 8 bits = 1 byte per parameter, no scales in the dtype alone.
    assert _weights(config, engine="formula") == TINY_PARAMS
    # vLLM has no float8 model dtype: without a quantization_config it serves the model in bfloat16
    # (config/model.py _resolve_auto_dtype: a dtype the platform lacks falls back to the first supported one)
    # and casts each weight on load, 2 bytes per parameter.
    assert _weights(config) == 2 * TINY_PARAMS


BAD_QUANT = [
    ({"quant_method": "gptq", "bits": "four"}, "quantization_config.bits"),
    ({"quant_method": "gptq", "bits": 5}, "quantization_config.bits"),
    ({"quant_method": "gptq", "bits": True}, "quantization_config.bits"),
    ({"quant_method": "gptq", "bits": 4.0}, "quantization_config.bits"),
    ({"quant_method": "gptq", "group_size": 0}, "quantization_config.group_size"),
    ({"quant_method": "gptq", "group_size": -2}, "quantization_config.group_size"),
    ({"quant_method": "gptq", "group_size": "128"}, "quantization_config.group_size"),
    ({"quant_method": "gptq", "group_size": 10**30}, "quantization_config.group_size"),
    ({"quant_method": "awq", "bits": 8}, "quantization_config.bits"),
    ({"quant_method": "awq", "w_bit": 4, "q_group_size": 0}, "quantization_config.q_group_size"),
    ({"quant_method": "fp8", "weight_block_size": [0, 128]}, "weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": [-128, 128]}, "weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": "128x128"}, "weight_block_size"),
    ({"quant_method": "fp8", "weight_block_size": [128.5, 128]}, "weight_block_size"),
]


@pytest.mark.parametrize(("quant", "field"), BAD_QUANT, ids=[json.dumps(q)[:50] for q, _ in BAD_QUANT])
def test_quantization_config_fields_are_validated(tmp_path: Path, quant: dict[str, Any], field: str) -> None:
    config = write(tmp_path, "config.json", {**TINY, "quantization_config": quant})
    assert field in cli_error(invoke(str(config), "--gpu", "h100", "--ctx", "8k"))


def _safetensors(offsets: Any, data_bytes: int = 16) -> bytes:
    header = json.dumps({"w": {"dtype": "BF16", "shape": [8], "data_offsets": offsets}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * data_bytes


@pytest.mark.parametrize(
    "offsets",
    [[0, -1000000000000], [-16, 0], [8, 4], [0, 17], [0, 2**70], ["0", "16"], [0, True], [0], None, [0.0, 16.0]],
    ids=repr,
)
def test_safetensors_headers_with_absurd_offsets_are_bad_input(tmp_path: Path, offsets: Any) -> None:
    folder = tmp_path / "model"
    write(folder, "config.json", TINY)
    write(folder, "model.safetensors", _safetensors(offsets))
    line = cli_error(invoke(str(folder), "--gpu", "h100", "--ctx", "8k"))
    assert "model.safetensors" in line and "data_offsets" in line


def test_valid_safetensors_header_is_summed(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    write(folder, "config.json", TINY)
    write(folder, "model.safetensors", _safetensors([0, 16]))
    assert _weights_of_folder(folder) == 16  # one BF16 tensor of 8 elements: 16 bytes


def _weights_of_folder(folder: Path) -> int:
    fit = kvsize.estimate(str(folder), ctx=8192, gpu="h100").scenarios[0].gpu
    assert fit is not None
    return fit.weights_bytes


@pytest.mark.parametrize("total", [-5, 0, -(10**12), "big", 2**70, True, 1.5], ids=repr)
def test_index_totals_that_are_no_size_are_bad_input(tmp_path: Path, total: Any) -> None:
    folder = tmp_path / "model"
    write(folder, "config.json", TINY)
    write(folder, "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": {}})
    line = (
        process_error(run_process(str(folder), "--gpu", "h100", "--ctx", "8k"))
        if total == -5
        else cli_error(invoke(str(folder), "--gpu", "h100", "--ctx", "8k"))
    )
    assert "model.safetensors.index.json" in line and "total_size" in line


# --- 8. verify: empty device, bad tolerance, unwritable report, all before the run ------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--device", ""],
        ["--device", "  "],
        ["--device", "tpu"],
        ["--tolerance", "nan"],
        ["--tolerance", "inf"],
        ["--tolerance", "-0.1"],
        ["--tolerance", "٠.١"],
        ["--encoder-len", "9" * 400],
        ["--layers", "٢"],
        ["--layers", "0"],
        ["--layers", "1e3"],
    ],
    ids=lambda a: " ".join(a),
)
def test_verify_options_refused_like_the_others(args: list[str]) -> None:
    cli_error(invoke("verify", "acme/never-fetched", *args))
    cli_error(invoke("acme/never-fetched", "--verify", *args))


@pytest.mark.parametrize(
    "args",
    [
        ["--decode-steps", "-1"],
        ["--decode-steps", "٤"],
        ["--decode-steps", "9" * 30],
        ["--max-cache-len", "0"],
        ["--max-cache-len", "١٠"],
        ["--max-cache-len", "9" * 400],
    ],
    ids=lambda a: " ".join(a)[:30],
)
def test_verify_counts_use_the_ascii_parser(args: list[str]) -> None:
    cli_error(invoke("verify", "acme/never-fetched", *args))


@pytest.mark.parametrize("where", ["missing-folder/report.md", "a-folder", ""])
def test_verify_report_path_checked_before_the_run(tmp_path: Path, where: str) -> None:
    (tmp_path / "a-folder").mkdir()
    target = str(tmp_path / where) if where else ""
    # acme/never-fetched is not resolvable offline: the report's error must come first.
    line = process_error(run_process("verify", "acme/never-fetched", "--device", "meta", "--report", target))
    assert "report" in line
    assert not (tmp_path / "missing-folder").exists()


def test_verify_report_created_early_is_removed_when_the_run_fails(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    proc = run_process("verify", "acme/never-fetched", "--device", "meta", "--report", str(report))
    assert proc.returncode in (2, 3) and not report.exists()


@pytest.mark.parametrize(
    ("field", "raw"), [("gpu_util", "9" * 20), ("link_bandwidth", "9" * 400), ("gpu_util", "9" * 400)]
)
def test_huge_integers_in_float_fields(field: str, raw: str) -> None:
    # math.isfinite() of a 20-digit int raises OverflowError: ints are compared exactly instead.
    extra = "    cpu_mem: 64GiB\n" if field == "link_bandwidth" else ""
    assert field in file_error(deployment(f"{extra}    {field}: {raw}\n"))
    assert "max_kv_fraction" in file_error(deployment(require="{ctx: 8k, max_kv_fraction: " + "9" * 20 + "}"))


@pytest.mark.parametrize("card", ["1", "1000", "1.5", "1k"])
def test_a_card_far_smaller_than_the_model_draws_a_bounded_bar(tmp_path: Path, card: str) -> None:
    # The reserve was drawn as reserve / card x 50 cells: 1.5 GiB on a 1-byte card asked for 8e10 cells
    # (MemoryError), on 1000 bytes for 8e7 (minutes). Each part is now at most one bar's width.
    config = write(tmp_path, "config.json", TINY)
    proc = run_process(str(config), "--ctx", "8k", "--gpu-mem", card)
    # Exit 1: the answer is "no", it does not fit (the scenario is printed first).
    assert proc.returncode == 1 and len(proc.stdout) < 20_000, (proc.returncode, len(proc.stdout), proc.stderr[-500:])
