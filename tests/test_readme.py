"""Every `kvsize` command in the README runs as written from the repository's folder, offline.

The commands are the lines of the README's ```bash and ```console blocks that start with `kvsize` (or
`$ kvsize`); a trailing comment, a pipe into another tool and an output redirection are not part of the
command. They run in a scratch folder that holds the repository's `examples/`, so relative paths resolve as
in a fresh clone and files they write stay out of the tree. "Runs" means exit 0, or exit 1 where the answer is
"no" (a scenario that does not fit); never a usage error (2), an environment error (3) or a traceback.
Verification commands (`kvsize verify`, `--verify`) run too when torch and transformers are installed (CI
installs them); only those that need a GPU (`--device cuda`) are skipped on a machine without one.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(?:bash|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
# Verification builds models with torch and transformers (the `verify` extra); a README verification command
# names its device, so that one meant for a GPU says so (`--device cuda`) and one for the CPU stays small.
NEEDS_VERIFY_EXTRA = ("kvsize verify", "--verify")


def _skip_reason(argv: list[str]) -> str | None:
    """Why this machine cannot run a README command as written, or None."""
    if argv[:2] == ["kvsize", "probe"] and "localhost" in argv[2]:
        return "needs an engine server running on this machine (tests/test_probe.py runs stand-ins)"
    gpu = argv[argv.index("--gpu") + 1] if "--gpu" in argv[:-1] else None
    if gpu == "auto":
        import shutil

        if shutil.which("nvidia-smi") is None:
            return "needs a GPU in this machine (--gpu auto); tests/test_local_gpu.py runs a stand-in nvidia-smi"
    if not any(marker in shlex.join(argv) for marker in NEEDS_VERIFY_EXTRA):
        return None
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        return f"needs the verify extra ({', '.join(missing)} missing): pip install -e '.[verify]'"
    device = argv[argv.index("--device") + 1] if "--device" in argv[:-1] else None
    if device is None:
        return None  # test_readme_verification_commands_name_their_device fails it
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return "needs a CUDA GPU (--device cuda); none is visible to torch"
    return None


def readme_commands() -> list[str]:
    commands = []
    for block in BLOCK.findall(README.read_text(encoding="utf-8")):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ").strip()
            if not line.startswith("kvsize "):
                continue
            command = re.split(r"\s+#\s", line, maxsplit=1)[0]  # a trailing comment
            command = re.split(r"\s[|>]\s?", command, maxsplit=1)[0].strip()  # a pipe or a redirection
            commands.append(command)
    return list(dict.fromkeys(commands))


def test_the_readme_has_commands() -> None:
    commands = readme_commands()
    assert len(commands) >= 10
    assert "kvsize meta-llama/Llama-3.1-8B --ctx 131072 --gpu h100" in commands
    assert not any("path/to" in c for c in commands)


# The exit code each README command must have, worked out from the case (0: the answer is yes or there is no
# question; 1: a scenario asked for does not fit, kvsize/cli/size.py). None depends on the machine: every model
# is in the offline registry and every card a profile. A README command missing here fails: say its verdict.
README_EXIT_CODES = {
    # Qwen3-8B (max_position_embeddings 40,960) with YaRN x4 over 32,768: vLLM 0.29 derives 131,072
    # (_get_and_verify_max_len@0.29.0), so 128k is served; 131,072 x 147,456 B = 18 GiB fits an H100.
    "kvsize Qwen/Qwen3-8B --ctx 128k --gpu h100 --engine-version 0.29 --hf-overrides '{\"rope_scaling\": "
    "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}}'": 0,
    # The switch set: vLLM serves past the maximum (a warning), and it fits.
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 kvsize Qwen/Qwen3-8B --ctx 131072 --gpu h100": 0,
    # 128k x 131,072 B = 16 GiB, under the ~55 GiB vLLM budget of one H100.
    "kvsize meta-llama/Llama-3.1-8B --ctx 131072 --gpu h100": 0,
    # No card: nothing to fit, sizes only.
    "kvsize examples/configs/acme-chat-3b/config.json --ctx 8k,32k --batch 1,8,32 --kv-dtype bf16,fp8": 0,
    # Without --ctx, 1 only if no context of the grid fits; a 3B model on 24 GiB fits short contexts.
    "kvsize examples/configs/acme-chat-3b --gpu-mem 24GiB": 0,
    # The README's "no: advice, exit 1". Per GPU at tp 4: KV 4 x 131,072 x (80 layers x 2 KV heads x 128 x 2 x
    # 2 B = 81,920 B) = 42,949,672,960 B; budget ceil(85,025,882,112 x 0.92) - 141,107,412,992 / 4 weights
    # - 2,040,614,912 activation (1024 x 128,256 x 14 + 132 x 128,256 x 4 + 8192 x 8192 x 2) - 2,233,382,912
    # NVLS non-torch - 1,170,378,752 CUDA graphs ~= 37.5e9 B, short of 42.9e9.
    "kvsize meta-llama/Llama-3.1-70B-Instruct --ctx 128k --gpu h100 --tp 4 --batch 4": 1,
    "kvsize Qwen/Qwen3-30B-A3B --ctx 32k --json": 0,  # no card
    # vLLM on an L4 cannot hold 32k x 131,072 B = 4,294,967,296 B: ceil(23,657,971,712 x 0.92) = 21,765,333,976
    # - 16,060,522,496 weights - 506,202,112 activation (256 x 128,256 x 14 + 58 x 128,256 x 4 + 2048 x 4096 x 2)
    # - 268,435,456 non-torch - 805,306,368 CUDA graphs = 4,124,867,544 B; one engine of --engine all not
    # fitting is a "no" (every scenario asked for must fit).
    "kvsize meta-llama/Llama-3.1-8B --ctx 32k --gpu l4 --engine all": 1,
    "kvsize gpus": 0,
    "kvsize models": 0,
    # examples/capacity.yaml: each deployment passes with room (chat-8b: 53 requests of 8k at util 0.9 >= 32;
    # the 70B at fp8 holds 5 GiB per 128k request per GPU, ~16 per replica, two replicas >= 8; the 3B on an L40S).
    "kvsize check examples/capacity.yaml": 0,
    "kvsize check examples/capacity.yaml --json --junit kvsize.xml": 0,
    "kvsize schema": 0,
    "kvsize plan meta-llama/Llama-3.1-70B-Instruct --ctx 32k --concurrency 64": 0,  # cards serve it (exit 1: none)
    "kvsize plan meta-llama/Llama-3.1-8B --ctx 8k --concurrency 4 --all-gpus --json": 0,
    # 2k shared once + 64 x 6k private = 395,264 tokens x 131,072 B = 48.25 GiB, under ~55 GiB.
    "kvsize meta-llama/Llama-3.1-8B --gpu h100 --ctx 8k --batch 64 --prefix-len 2k": 0,
    "kvsize meta-llama/Llama-3.1-8B --gpu h100 --prompt-len 1500 --output-len 500": 0,  # no --ctx: the grid fits
    "kvsize meta-llama/Llama-3.1-8B --gpu h100 --workload examples/chat_workload.csv": 0,
    "kvsize evict --tokens 16000 --keep 10% --block-size 16": 0,  # a simulation, no verdict
    "kvsize evict --tokens 16000 --keep 10% --block-size 16 --pattern recent": 0,
    "kvsize evict --tokens 16000 --keep 1600 --pattern clustered --seed 1 --json": 0,
    # 32k x 131,072 B = 4 GiB fits on the card itself; the offload tiers only add capacity.
    "kvsize meta-llama/Llama-3.1-8B --gpu h100 --ctx 32k --cpu-mem 512GiB --disk 4TiB": 0,
    # --emit: at tp 4 and fp8 the 32k x 16 requests take 16 x 32,768 x 65,536 / 4 B = 8 GiB per GPU: it fits,
    # and the launch line is printed (tests/test_launch.py checks it flag by flag).
    "kvsize meta-llama/Llama-3.1-8B --gpu h100 --tp 4 --ctx 32k --batch 16 --kv-dtype fp8 --emit vllm": 0,
    "kvsize meta-llama/Llama-3.1-8B --gpu auto --tp auto --ctx 32k --batch 16 --emit sglang": 0,  # on a GPU
    "kvsize models --fits h100 --ctx 32k --concurrency 8": 0,  # the 8B holds 13 of 32k: some models fit
    # Latency bounds have no verdict; 16 x 32k x 131,072 B = 64 GiB does not fit one H100's ~55 GiB: exit 1.
    "kvsize meta-llama/Llama-3.1-8B --gpu h100 --ctx 8k,32k --batch 1,16 --itl 50": 1,
    "kvsize probe http://localhost:8000 --gpu h100 --tp 1": 0,  # against a running server
    "kvsize check examples/capacity.yaml --emit-dir launch/": 0,  # each deployment passes (above)
    # 8k x 131,072 B = 1 GiB fits; the benchmark comparison has no verdict (tests/test_bench_result.py).
    "kvsize meta-llama/Llama-3.1-8B --gpu h100 --ctx 8k --bench-result examples/bench/vllm-bench-serve.json": 0,
    "kvsize meta-llama/Llama-3.1-8B --gpu gh200 --ctx 32k --cpu-mem 480GB --disk 4TB": 0,
    # Verifications: 0 when transformers allocates what kvsize predicts, 1 on any mismatch (a regression).
    "kvsize verify meta-llama/Llama-3.1-8B --device cuda --ctx 4k,32k --batch 1,8": 0,
    "kvsize verify deepseek-ai/DeepSeek-V3 --device meta --ctx 128k": 0,
    "kvsize verify Qwen/Qwen3-0.6B --device cpu --layers 2 --ctx 128": 0,
    "kvsize meta-llama/Llama-3.1-8B --ctx 4k --verify --device cuda": 0,
}


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs(command: str, tmp_path: Path) -> None:
    reason = _skip_reason(shlex.split(command))
    if reason is not None:
        pytest.skip(reason)
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("KVSIZE_DEBUG", "HF_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home"), PYTHONPATH=str(ROOT), COLUMNS="100")
    argv = shlex.split(command)
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", *argv[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert command in README_EXIT_CODES, f"give {command!r} its exit code in README_EXIT_CODES"
    assert done.returncode == README_EXIT_CODES[command], done.stderr
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr
    assert done.stdout.strip()


def test_readme_verification_commands_name_their_device() -> None:
    """Without --device a verification picks CUDA when a GPU is visible, else the CPU: a README line meant for a
    GPU would then build a whole 8B model on a laptop's CPU (refused, exit 2). Each names the device it needs."""
    verifying = [c for c in readme_commands() if any(marker in c for marker in NEEDS_VERIFY_EXTRA)]
    assert len(verifying) >= 3
    for command in verifying:
        argv = shlex.split(command)
        assert "--device" in argv[:-1] and argv[argv.index("--device") + 1] in ("cuda", "cpu", "meta"), command
    assert any("--device cpu" in c for c in verifying)  # one runs anywhere: the CPU line


def test_readme_headline_is_current() -> None:
    """The README's first output is what the command prints now, at 80 columns without colour."""
    text = README.read_text(encoding="utf-8")
    shown = text.split("$ kvsize meta-llama/Llama-3.1-8B --ctx 131072 --gpu h100\n", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR",)}
    env.update(COLUMNS="80", NO_COLOR="1", PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "131072", "--gpu", "h100"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0

    def lines(s: str) -> list[str]:
        return [line.rstrip() for line in s.strip().splitlines()]

    assert lines(done.stdout) == lines(shown)


def test_ci_runs_the_readme_test_command() -> None:
    """CI (.ci/run) runs exactly the README's test command, so the two cannot drift apart."""
    readme_lines = [
        line
        for block in BLOCK.findall(README.read_text(encoding="utf-8"))
        for line in block.splitlines()
        if line.startswith("python3 -m venv .venv") and "pytest" in line
    ]
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if "pytest" in line]
    assert len(readme_lines) == 1 and ci_lines == readme_lines
    assert "torch==2.13.0" in ci_lines[0]  # pinned: an open `torch` can pull a multi-GB CUDA build


def test_readme_json_sample_is_current() -> None:
    """Every literal value the README's JSON sample shows (numbers, booleans, null, whole strings) is what
    `--json` prints now for the same command, under the same key; `...` marks what the sample leaves out."""
    import json

    text = README.read_text(encoding="utf-8")
    sample = text.split("## JSON contract", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "131072", "--gpu", "h100", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    values: dict[str, list[object]] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                values.setdefault(key, []).append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(done.stdout))
    shown = re.findall(r'"(\w+)": (-?\d[\d.e+]*|true|false|null|\[\]|"[^"]*")', sample)
    assert len(shown) > 50
    for key, literal in shown:
        if literal.startswith('"') and literal.endswith('..."'):
            continue
        assert json.loads(literal) in values.get(key, []), (key, literal)


def readme_outputs() -> list[tuple[str, list[str]]]:
    """(command, the output lines its comment shows): lines `#  text` under a `kvsize` line of a bash block.
    A run of three or more spaces starts an annotation (not output); `...` elides part of a line."""
    found: list[tuple[str, list[str]]] = []
    for block in BLOCK.findall(README.read_text(encoding="utf-8")):
        for line in block.splitlines():
            if line.startswith("kvsize "):
                found.append((re.split(r"\s+#\s", line, maxsplit=1)[0].strip(), []))
            elif line.startswith("#  ") and found:
                found[-1][1].append(re.split(r"\s{3,}", line[3:].strip(), maxsplit=1)[0])
    return [(command, shown) for command, shown in found if shown]


@pytest.mark.parametrize("command,shown", readme_outputs(), ids=lambda v: v if isinstance(v, str) else "")
def test_readme_output_comments_are_current(command: str, shown: list[str], tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", *shlex.split(command)[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    printed = " ".join(done.stdout.replace("│", " ").split())
    for line in shown:
        for piece in line.split("..."):
            piece = " ".join(piece.replace("│", " ").split())
            assert piece in printed, (command, piece)
