"""`kvsize check`, `kvsize schema`, `kvsize plan`: requirements passing and failing, bad files, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvsize.capacity_file import parse_capacity
from kvsize.cli import app
from kvsize.errors import ConfigError

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

runner = CliRunner()
LLAMA = "meta-llama/Llama-3.1-8B"
H100 = 85_520_809_984
WEIGHTS = 16_060_522_496
REQUESTED = -(-(H100 - 494_927_872) * 92 // 100)
ACTIVATION = 1024 * 128_256 * 14 + 132 * 128_256 * 4 + 8192 * 4096 * 2  # budget.vllm_activation_bytes, H100
ROPE_TABLE = 131_072 * 128 * 2  # max_position_embeddings x head_dim x bf16 (kvsize/rope_tables.py)
BUDGET = REQUESTED - WEIGHTS - ROPE_TABLE - ACTIVATION - 268_435_456 - 805_306_368  # vLLM 0.33.0, one H100
PER_8K = 8192 * 131_072  # one 8k request of Llama-3.1-8B: 512 blocks x 2 MiB


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "capacity.yaml"
    path.write_text(body)
    return path


def one(requirement: str, extra: str = "") -> str:
    return f"deployments:\n  - name: d\n    model: {LLAMA}\n    gpu: h100\n{extra}    require: {requirement}\n"


def check(path: Path, *args: str) -> tuple[int, dict[str, object] | None, str]:
    result = runner.invoke(app, ["check", str(path), "--json", *args])
    data = json.loads(result.stdout) if result.stdout.strip() else None
    return result.exit_code, data, result.stderr


@pytest.mark.parametrize(("requirement", "passes"), [
    (f"{{ctx: 8k, min_concurrency: {BUDGET // PER_8K}}}", True),
    (f"{{ctx: 8k, min_concurrency: {BUDGET // PER_8K + 1}}}", False),
    (f"{{ctx: 8k, batch: {BUDGET // PER_8K}}}", True),  # default check: the batch fits
    (f"{{ctx: 8k, batch: {BUDGET // PER_8K + 1}}}", False),
    ("{ctx: 128k, max_kv_fraction: 0.30}", True),  # 16 GiB of a ~55 GiB budget = 29%
    ("{ctx: 128k, max_kv_fraction: 0.25}", False),
    (f"{{ctx: 8k, batch: 4, max_context: {BUDGET // (4 * 131_072) // 16 * 16}}}", True),
    (f"{{ctx: 8k, batch: 4, max_context: {BUDGET // (4 * 131_072) // 16 * 16 + 16}}}", False),
    (f"{{ctx: 8k, min_pool_tokens: {BUDGET // (2 * 1024**2) * 16}}}", True),
    (f"{{ctx: 8k, min_pool_tokens: {BUDGET // (2 * 1024**2) * 16 + 1}}}", False),
])
def test_requirement_kinds(tmp_path: Path, requirement: str, passes: bool) -> None:
    code, data, stderr = check(write(tmp_path, one(requirement)))
    assert code == (0 if passes else 1), stderr
    assert data is not None
    [d] = data["deployments"]  # type: ignore[index]
    assert d["pass"] is passes and d["kv_budget_bytes"] == BUDGET and d["name"] == "d"
    assert isinstance(d["reason"], str) and d["reason"]


def test_replicas_multiply_concurrency(tmp_path: Path) -> None:
    per_gpu = BUDGET // PER_8K
    code, data, _ = check(write(tmp_path, one(f"{{ctx: 8k, min_concurrency: {3 * per_gpu}}}", "    gpus: 3\n")))
    assert code == 0 and data["deployments"][0]["max_concurrency"] == 3 * per_gpu  # type: ignore[index]


def test_weights_that_do_not_fit_fail(tmp_path: Path) -> None:
    body = one("{ctx: 8k}").replace(LLAMA, "meta-llama/Llama-3.1-70B-Instruct").replace("h100", "l4")
    code, data, _ = check(write(tmp_path, body))
    assert code == 1 and "no KV memory" in data["deployments"][0]["reason"]  # type: ignore[index]


def test_relative_model_path_is_resolved_against_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    model.joinpath("config.json").write_text(json.dumps({
        "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000, "torch_dtype": "bfloat16"}))
    path = write(tmp_path, "deployments:\n  - {name: m, model: ./models/m, gpu_mem: 8GiB, engine: formula, "
                           "weights_mem: 1GiB, require: {ctx: 1k}}\n")
    monkeypatch.chdir("/")
    code, data, stderr = check(path)
    assert code == 0, stderr
    # 2 layers x 2 KV heads x 64 x 2 x 2 B = 1,024 B per token.
    assert data["deployments"][0]["kv_bytes_per_token"] == 1024  # type: ignore[index]


def test_junit_and_github_annotations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, one("{ctx: 128k, min_concurrency: 1000}"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    report = tmp_path / "junit.xml"
    result = runner.invoke(app, ["check", str(path), "--junit", str(report)])
    assert result.exit_code == 1
    xml = report.read_text()
    assert 'tests="1" failures="1"' in xml and "<failure message=" in xml and 'name="d"' in xml
    # line=2: the deployment's first line; ':' in a property value is escaped as %3A (actions/runner
    # ActionCommand.cs), and the runner shows ':' again.
    assert result.stderr.startswith(f"::error file={path},line=2,title=kvsize capacity%3A d::max concurrency")


@pytest.mark.parametrize(("body", "message"), [
    ("deployments:\n  - name: d\n    model: x\n   gpu: h100\n", "line 4"),  # bad indentation
    ("deployments: [\n", "line"),
    ("{}", "line 1: field 'deployments': missing"),
    ("deployments: []", "deployments"),
    ("- a\n- b\n", "must be a mapping"),
    ("deployments:\n  - name: d\n    model: m\n    gpu: h100\n    gpu_utl: 0.9\n    require: {ctx: 8k}\n",
     "line 5: field 'deployments.0.gpu_utl': unknown key 'gpu_utl'"),
    ("deployments:\n  - name: d\n    model: m\n    gpu: h100\n    require: {ctx: 8k, min_concurrency: lots}\n",
     "line 5: field 'deployments.0.require.min_concurrency'"),
    ("deployments:\n  - name: d\n    model: m\n    tp: -2\n    require: {ctx: 8k}\n", "field 'deployments.0.tp'"),
    ("deployments:\n  - name: d\n    model: m\n    require: {ctx: 128q}\n", "cannot read the token count '128q'"),
    ("deployments:\n  - !!python/object/apply:os.system [echo pwned]\n", "could not determine a constructor"),
    ("deployments: !!python/name:os.system\n", "constructor"),
])
def test_bad_files_name_line_and_field(tmp_path: Path, body: str, message: str) -> None:
    code, data, stderr = check(write(tmp_path, body))
    assert code == 2 and data is None
    assert stderr.count("\n") == 1 and stderr.startswith("Error: ") and message in stderr, stderr


def test_alias_bomb_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    with pytest.raises(ConfigError, match="alias"):
        parse_capacity("\n".join(lines) + "\ndeployments: *a8\n", source="bomb.yaml")


def test_shared_anchors_are_fine() -> None:
    text = ("deployments:\n"
            "  - {name: a, model: m, gpu: h100, require: &req {ctx: 8k, min_concurrency: 4}}\n"
            "  - {name: b, model: m, gpu: h200, require: *req}\n")
    parsed = parse_capacity(text, source="x.yaml")
    assert [d.require.min_concurrency for d in parsed.deployments] == [4, 4]


def test_missing_file(tmp_path: Path) -> None:
    code, _, stderr = check(tmp_path / "nope.yaml")
    assert code == 2 and "cannot read" in stderr and stderr.count("Error:") == 1


def test_schema_is_json_schema() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["required"] == ["deployments"] and "Deployment" in schema["$defs"]
    assert schema["$defs"]["Deployment"]["additionalProperties"] is False
    assert "min_concurrency" in schema["$defs"]["Requirement"]["properties"]


def test_plan_ranks_by_gpus_then_cost() -> None:
    result = runner.invoke(app, ["plan", LLAMA, "--ctx", "8k", "--concurrency", str(3 * (BUDGET // PER_8K)),
                                 "--gpus", "h100,h200,l4", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["model"], data["ctx"], data["concurrency"], data["engine"], data["kv_dtype"]) == (
        LLAMA, 8192, 3 * (BUDGET // PER_8K), "vllm", "bf16")
    plans = data["plans"]
    h100 = next(p for p in plans if p["gpu"] == "h100-sxm")
    assert (h100["gpus"], h100["tp"], h100["replicas"]) == (3, 1, 3)
    assert [p["gpus"] for p in plans] == sorted(p["gpus"] for p in plans)
    # The cheapest listed H100 SXM offer in gpu_profiles/h100-sxm.yaml is 3.95 USD per GPU-hour (Modal).
    assert h100["usd_per_hour"] == round(3 * 3.95, 2)


def test_plan_needs_ctx() -> None:
    result = runner.invoke(app, ["plan", LLAMA])
    assert result.exit_code == 2 and "needs --ctx" in result.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_junit_onto_a_full_disk_is_an_environment_error() -> None:
    """A report the disk refuses (ENOSPC) is exit 3, the environment; a path that cannot be a file is exit 2."""
    import subprocess
    import sys

    example = Path(__file__).resolve().parent.parent / "examples" / "capacity.yaml"
    full = subprocess.run(
        [sys.executable, "-m", "kvsize", "check", str(example), "--junit", "/dev/full"],
        capture_output=True, text=True, timeout=120,
    )
    assert full.returncode == 3 and full.stderr.startswith("Error: --junit: cannot write /dev/full")
    missing = subprocess.run(
        [sys.executable, "-m", "kvsize", "check", str(example), "--junit", "/nonexistent-dir/k.xml"],
        capture_output=True, text=True, timeout=120,
    )
    assert missing.returncode == 2 and missing.stderr.count("Error:") == 1


# --- as a process: the exit code the shell and CI see ------------------------------------------------------


def run_check(path: Path, *args: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "kvsize", "check", str(path), *args], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def deployment(name: str, requirement: str, engine: str = "vllm") -> str:
    release = '    engine_version: "0.33.0"\n' if engine == "vllm" else ""  # the release BUDGET was worked for
    head = f"  - name: {name}\n    model: {LLAMA}\n    gpu: h100\n    engine: {engine}\n"
    return f"{head}{release}    require: {requirement}\n"


# Llama-3.1-8B under vLLM 0.33.0 on one H100: BUDGET // PER_8K requests of 8k fit (worked out at the top of this
# file: ceil(85,025,882,112 x 0.92) - weights - activation - non-torch - CUDA graphs, over 8192 x 131,072 B).
FITS = f"{{ctx: 8k, min_concurrency: {BUDGET // PER_8K}}}"
ONE_TOO_MANY = f"{{ctx: 8k, min_concurrency: {BUDGET // PER_8K + 1}}}"


def test_check_exits_1_when_any_deployment_fails(tmp_path: Path) -> None:
    # kvsize check: exit 0 only when every deployment passes. The failing one sits between two passing ones,
    # so neither "any passes", "the first decides" nor "the last decides" reads 0.
    body = "deployments:\n" + deployment("a", FITS) + deployment("b", ONE_TOO_MANY) + deployment("c", FITS)
    code, stdout, stderr = run_check(write(tmp_path, body), "--json")
    assert code == 1, stderr
    rows = json.loads(stdout)["deployments"]
    assert [(r["name"], r["pass"]) for r in rows] == [("a", True), ("b", False), ("c", True)]
    most = BUDGET // PER_8K
    assert rows[1]["reason"] == f"max concurrency at 8,192 tokens is {most:,}, below {most + 1:,}"


def test_check_exits_0_when_every_deployment_passes(tmp_path: Path) -> None:
    body = "deployments:\n" + deployment("a", FITS) + deployment("b", "{ctx: 8k}")
    code, stdout, stderr = run_check(write(tmp_path, body), "--json")
    assert code == 0, stderr
    rows = json.loads(stdout)["deployments"]
    assert [(r["name"], r["pass"]) for r in rows] == [("a", True), ("b", True)]


@pytest.mark.parametrize("engine", ["hf", "formula", "llamacpp"])
def test_min_pool_tokens_without_a_pool_is_a_bad_file(tmp_path: Path, engine: str) -> None:
    # Only vLLM, SGLang and TensorRT-LLM allocate a KV pool at start-up (kvsize/fit.py pool_figures): under any
    # other engine min_pool_tokens cannot be judged, so the file is bad input (exit 2) naming the deployment,
    # its line and the key -- not a pass, and not a failure reading "the pool holds 0 tokens". The first
    # deployment passes and the file is still refused as a whole, with nothing on stdout.
    body = "deployments:\n" + deployment("ok", FITS) + deployment("pooled", "{ctx: 8k, min_pool_tokens: 1000}", engine)
    path = write(tmp_path, body)
    code, stdout, stderr = run_check(path, "--json")
    assert code == 2, stderr
    assert stdout == ""
    assert stderr.startswith(
        f"Error: {path}: line 8: deployment 'pooled': engine {engine} has no KV pool to hold min_pool_tokens"
    )
    assert stderr.count("Error:") == 1 and "Traceback" not in stderr
    # The same requirement under a pooled engine is judged: vLLM's pool holds BUDGET // 2 MiB blocks x 16 tokens.
    pooled = "deployments:\n" + deployment("pooled", "{ctx: 8k, min_pool_tokens: 1000}", "vllm")
    code, stdout, stderr = run_check(write(tmp_path, pooled), "--json")
    assert code == 0, stderr
    [row] = json.loads(stdout)["deployments"]
    assert row["pass"] is True and row["kv_pool_tokens"] == BUDGET // (2 * 1024**2) * 16
