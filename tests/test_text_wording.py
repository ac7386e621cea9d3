"""Numbers people read are formatted, wording names what it means (audit of issue 12, items 13 and 17).

JSON keeps integer bytes; text shows format_bytes (binary units, two decimals) and token counts with
thousands separators. Hand values: Llama-3.1-8B's published safetensors size 16,060,522,496 B and the H100
SXM profile's 85,520,809,984 B (as tests/test_capacity.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvsize.cli import app
from kvsize.units import format_bytes, format_tokens

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

runner = CliRunner()
LLAMA = "meta-llama/Llama-3.1-8B"
H100 = 85_520_809_984
WEIGHTS = 16_060_522_496
RAW_NUMBER = re.compile(r"(?<![\d.,])\d{5,}(?![\d.,])")  # 5+ digits with no separator: a raw byte or token count


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    return result.exit_code, result.stdout, result.stderr


def test_format_tokens_groups_thousands() -> None:
    assert format_tokens(2000) == "2,000"  # a heading read "To make it fit (2000 x300)"
    assert format_tokens(8192) == "8k" and format_tokens(131072) == "128k"


def test_weights_share_per_gpu_in_binary_units() -> None:
    code, out, _ = run(LLAMA, "--ctx", "8k", "--gpu", "h100", "--tp", "2")
    assert code == 0
    # 16,060,522,496 B / 2^30 = 14.957... GiB
    assert "1/2 of 14.96 GiB per GPU" in out
    assert "16,060,522,496 B" not in out
    data = json.loads(run(LLAMA, "--ctx", "8k", "--gpu", "h100", "--tp", "2", "--json")[1])
    gpu = data["scenarios"][0]["gpu"]
    assert gpu["weights_bytes"] == -(-WEIGHTS // 2)  # JSON keeps integer bytes


def test_reserve_names_what_is_kept_back_for_card_minus_reserve_engines() -> None:
    # budget.py, formula / hf / llamacpp: reserve = card - card * 92 // 100 (8%, as vLLM's default 0.92)
    reserve = H100 - H100 * 92 // 100  # 6,841,664,799 B = 6.37 GiB
    for engine in ("llamacpp", "hf", "formula"):
        code, out, _ = run(LLAMA, "--ctx", "8k", "--gpu", "h100", "--engine", engine)
        assert code == 0, engine
        assert f"reserve {format_bytes(reserve)} = 8% of the card kept back {format_bytes(reserve)}" in out, engine
    code, out, _ = run(LLAMA, "--ctx", "8k", "--gpu", "h100", "--engine", "all")
    assert "8% of the card kept back" in out and "= kept back" not in out
    code, out, _ = run(LLAMA, "--ctx", "8k", "--gpu", "h100", "--engine", "llamacpp", "--reserve", "4GiB")
    assert "reserve 4.00 GiB = given reserve (--reserve) 4.00 GiB" in out


def test_engine_pool_line_covers_every_ctx_of_the_grid() -> None:
    code, out, _ = run(LLAMA, "--ctx", "8k,32k", "--gpu", "h100")
    assert code == 0
    data = json.loads(run(LLAMA, "--ctx", "8k,32k", "--gpu", "h100", "--json")[1])
    pools = {s["gpu"]["kv_pool_tokens"] for s in data["scenarios"]}
    assert len(pools) == 1
    concurrency = {s["ctx"]: s["gpu"]["concurrency"] for s in data["scenarios"]}
    line = next(line for line in out.splitlines() if line.startswith("engine pool"))
    assert f"engine pool (tokens of KV): {pools.pop():,};" in line
    assert f"concurrency for 8,192 tokens per request: {concurrency[8192]:.2f}x" in line
    assert f"for 32,768 tokens per request: {concurrency[32768]:.2f}x" in line


def test_engine_pool_line_names_the_dtype_when_there_are_several() -> None:
    code, out, _ = run(LLAMA, "--ctx", "8k", "--gpu", "h100", "--kv-dtype", "bf16,fp8")
    assert code == 0
    pool_lines = [line for line in out.splitlines() if line.startswith("engine pool")]
    assert [line.split(")")[0] for line in pool_lines] == [
        "engine pool (tokens of KV, bf16",
        "engine pool (tokens of KV, fp8_e4m3",
    ]


_BLOCK_TORCH = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["kvsize", *ARGS]
from kvsize.cli import main
main()
"""


def verify_note(*args: str) -> str:
    code = _BLOCK_TORCH.replace("ARGS", repr(list(args)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr  # torch blocked: the extra is missing, after the note
    return next(line for line in done.stderr.splitlines() if line.startswith("note: --verify"))


def test_verify_note_grammar_for_one_and_several_flags() -> None:
    assert verify_note(LLAMA, "--verify", "--gpu", "h100").endswith("; --gpu does not apply to it.")
    assert verify_note(LLAMA, "--verify", "--gpu", "h100", "--plot", "x.png").endswith(
        "; --gpu, --plot do not apply to it."
    )


# --- kvsize check -----------------------------------------------------------------------------------------


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "capacity.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_check_reasons_format_bytes_and_tokens(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        deployments:
          - name: no-room
            model: meta-llama/Llama-3.1-70B-Instruct
            gpu: l4
            require:
              ctx: 8192
          - name: too-many
            model: meta-llama/Llama-3.1-8B
            gpu: h100
            require:
              ctx: 131072
              batch: 64
        """,
    )
    code, out, err = run("check", str(path), "--json", env={"GITHUB_ACTIONS": "true"})
    assert code == 1
    reasons = {d["name"]: d["reason"] for d in json.loads(out)["deployments"]}
    assert re.fullmatch(r"the weights leave no KV memory \(budget -\d+\.\d\d GiB\)", reasons["no-room"])
    # 64 x 131,072 tokens x 131,072 B per token (2 x 32 layers x 8 kv heads x 128 x 2 B) = 2^40 B = 1.00 TiB;
    # the budget as tests/test_capacity.py BUDGET (vLLM 0.33.0 on one H100)
    requested = -(-(H100 - 494_927_872) * 92 // 100)
    activation = 1024 * 128_256 * 14 + 132 * 128_256 * 4 + 8192 * 4096 * 2
    rope_table = 131_072 * 128 * 2  # max_position_embeddings x head_dim x bf16 (kvsize/rope_tables.py)
    budget = requested - WEIGHTS - rope_table - activation - 268_435_456 - 805_306_368
    assert reasons["too-many"] == (
        f"64 requests of 131,072 tokens need 1.00 TiB of KV per GPU, over the budget of {format_bytes(budget)}"
    )
    for reason in reasons.values():
        assert RAW_NUMBER.search(reason) is None, reason
    annotations = [line for line in err.splitlines() if line.startswith("::error")]
    assert len(annotations) == 2 and all(RAW_NUMBER.search(a.split("::")[-1]) is None for a in annotations)
    junit = tmp_path / "report.xml"
    run("check", str(path), "--junit", str(junit))
    assert RAW_NUMBER.search(junit.read_text().split("<testcase", 1)[1]) is None


def test_check_loose_model_name_fails_with_did_you_mean(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        deployments:
          - name: loose
            model: llama-3.1-8b
            gpu: h100
            require:
              ctx: 8192
        """,
    )
    code, out, _ = run("check", str(path), "--json", env={"HF_HUB_OFFLINE": "1"})
    assert code == 1
    (result,) = json.loads(out)["deployments"]
    assert result["reason"].startswith("model 'llama-3.1-8b' cannot be loaded: ")
    assert "Did you mean: meta-llama/Llama-3.1-8B," in result["reason"]


def test_bad_gpu_in_a_capacity_file_is_annotated(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        deployments:
          - name: ok
            model: meta-llama/Llama-3.1-8B
            gpu: h100
            require:
              ctx: 8192
          - name: badgpu
            model: meta-llama/Llama-3.1-8B
            gpu: h1000
            require:
              ctx: 8192
        """,
    )
    code, out, err = run("check", str(path), env={"GITHUB_ACTIONS": "true"})
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"::error file={path},line=7,title=kvsize capacity%3A bad input::")
    assert "unknown GPU profile 'h1000'" in lines[0]
    assert lines[1].startswith(f"Error: {path}: line 7: deployment 'badgpu': unknown GPU profile 'h1000'")
    code, _, err = run("check", str(path))  # outside GitHub Actions: the Error line only
    assert code == 2 and not err.startswith("::")


def test_schema_error_in_a_capacity_file_is_annotated_on_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "deployments:\n  - name: x\n    model: m\n    gpu: h100\n    colour: red\n")
    code, _, err = run("check", str(path), env={"GITHUB_ACTIONS": "true"})
    assert code == 2
    assert err.startswith(f"::error file={path},line=5,") or err.startswith(f"::error file={path},line=2,")
