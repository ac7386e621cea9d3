"""`kvsize check FILE --emit-dir DIR`: one launch command per deployment that passes, as `kvsize MODEL --emit`
builds it (kvsize/launch.py sized_launch), every flag one the release's parser accepts
(kvsize/data/engine_flags/*.json); file names made safe, collisions and existing files refused."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvsize.cli import app
from kvsize.launch import release_flags

runner = CliRunner()
LLAMA = "meta-llama/Llama-3.1-8B"


def deployment(
    name: str, engine: str, version: str, *, gpu: str = "h100", require: str = "{ctx: 32k, batch: 4}"
) -> str:
    return (
        f"  - name: {json.dumps(name)}\n    model: {LLAMA}\n    gpu: {gpu}\n    engine: {engine}\n"
        f"    engine_version: '{version}'\n    tp: 2\n    max_num_seqs: 8\n    require: {require}\n"
    )


def capacity(tmp_path: Path, *deployments: str) -> Path:
    path = tmp_path / "capacity.yaml"
    path.write_text("deployments:\n" + "".join(deployments), encoding="utf-8")
    return path


def check(path: Path, folder: Path | str, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    result = runner.invoke(app, ["check", str(path), "--emit-dir", str(folder), "--json", *args])
    data = json.loads(result.stdout) if result.stdout.strip() else None
    return result.exit_code, data, result.stderr


def argv_of(file: Path) -> list[str]:
    """The command line of a launch file (its first line), as a shell splits it; the rest are `# ` lines."""
    first, *rest = file.read_text(encoding="utf-8").splitlines()
    assert all(line.startswith("# ") for line in rest)
    return shlex.split(first)


def assert_release_flags(engine: str, release: str, argv: list[str], start: int) -> dict[str, str]:
    """Every flag after the program (and model) is in the release's list, every value with choices one of
    them; returns flag -> value."""
    flags = release_flags(engine, release)
    values = {}
    for i, arg in enumerate(argv[start:], start):
        if arg.startswith("-"):
            assert arg in flags.flags, (engine, release, arg)
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            if not nxt.startswith("-"):
                values[arg] = nxt
                if arg in flags.choices:
                    assert nxt in flags.choices[arg], (engine, release, arg, nxt)
    return values


def test_vllm_and_sglang_deployments_write_their_commands(tmp_path: Path) -> None:
    path = capacity(tmp_path, deployment("chat-vllm", "vllm", "0.14.1"), deployment("chat_sglang", "sglang", "0.5.4"))
    out = tmp_path / "launch" / "nested"  # created if missing, parents too
    code, data, stderr = check(path, out)
    assert code == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == ["chat-vllm.sh", "chat_sglang.sh"]
    assert data is not None and [f["file"] for f in data["launch_files"]] == [
        str(out / "chat-vllm.sh"),
        str(out / "chat_sglang.sh"),
    ]
    vllm = argv_of(out / "chat-vllm.sh")
    assert vllm[:3] == ["vllm", "serve", LLAMA]
    value = assert_release_flags("vllm", "0.14.1", vllm, 3)
    assert value["--tensor-parallel-size"] == "2"  # tp: 2
    assert value["--max-model-len"] == "32768"  # ctx 32k = 32 x 1024
    assert value["--max-num-seqs"] == "8"  # max_num_seqs: 8, the cap the check sized with
    assert value["--gpu-memory-utilization"] == "0.9"  # vllm-0.14.1 vllm/config/cache.py: default 0.9
    sglang = argv_of(out / "chat_sglang.sh")
    assert sglang[:5] == ["python", "-m", "sglang.launch_server", "--model-path", LLAMA]
    value = assert_release_flags("sglang", "0.5.4", sglang, 5)
    assert value["--tp-size"] == "2" and value["--context-length"] == "32768"
    assert value["--max-running-requests"] == "8"


def test_the_same_commands_as_emit(tmp_path: Path) -> None:
    path = capacity(tmp_path, deployment("d", "vllm", "0.14.1"))
    assert check(path, tmp_path / "out")[0] == 0
    emitted = runner.invoke(
        app,
        [LLAMA, "--gpu", "h100", "--tp", "2", "--ctx", "32k", "--batch", "4", "--max-num-seqs", "8"]
        + ["--engine-version", "0.14.1", "--emit", "vllm"],
    )
    assert emitted.exit_code == 0, emitted.output
    assert (tmp_path / "out" / "d.sh").read_text(encoding="utf-8") == emitted.stdout


def test_hostile_names_stay_in_the_folder(tmp_path: Path) -> None:
    path = capacity(tmp_path, deployment("../x", "vllm", "0.14.1"), deployment("a/b", "sglang", "0.5.4"))
    out = tmp_path / "out"
    code, _, stderr = check(path, out)
    assert code == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == ["___x.sh", "a_b.sh"]  # '.' and '/' are no file-name letters
    assert not (tmp_path / "x.sh").exists() and not (out / "a").exists()


def test_names_that_make_one_file_are_refused_before_any_work(tmp_path: Path) -> None:
    for first, second in (("Prod", "prod"), ("a/b", "a_b")):  # case aside (macOS, Windows), and after the mapping
        path = capacity(tmp_path, deployment(first, "vllm", "0.14.1"), deployment(second, "sglang", "0.5.4"))
        out = tmp_path / f"out-{second.replace('/', '')}"
        code, data, stderr = check(path, out)
        assert code == 2 and data is None
        assert f"'{first}' and '{second}' would both be written to" in stderr
        assert len(stderr.strip().splitlines()) == 1
        assert not out.exists()  # refused before anything was made


def test_an_existing_file_is_refused_and_kept(tmp_path: Path) -> None:
    path = capacity(tmp_path, deployment("d", "vllm", "0.14.1"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "d.sh").write_text("mine\n", encoding="utf-8")  # kvsize has no --force anywhere: never overwritten
    code, _, stderr = check(path, out)
    assert code == 2 and "d.sh already exists" in stderr
    assert (out / "d.sh").read_text(encoding="utf-8") == "mine\n"


def test_a_folder_that_is_a_file_is_bad_input(tmp_path: Path) -> None:
    path = capacity(tmp_path, deployment("d", "vllm", "0.14.1"))
    (tmp_path / "plain").write_text("", encoding="utf-8")
    for folder in (tmp_path / "plain", tmp_path / "plain" / "sub"):
        code, data, stderr = check(path, folder)
        assert code == 2 and data is None
        assert "--emit-dir" in stderr and len(stderr.strip().splitlines()) == 1


def test_a_failing_deployment_writes_nothing_and_the_exit_code_stays(tmp_path: Path) -> None:
    # 16 requests of 128k on an L4: 16 x 131,072 tokens x 128 KiB (32 layers x 8 KV heads x 128 x 2 x 2 bytes)
    # = 256 GiB of KV, far past a 24 GB card.
    path = capacity(
        tmp_path,
        deployment("small", "vllm", "0.14.1"),
        deployment("big", "sglang", "0.5.4", gpu="l4", require="{ctx: 128k, batch: 16}"),
    )
    out = tmp_path / "out"
    code, data, _ = check(path, out)
    assert code == 1
    assert [p.name for p in out.iterdir()] == ["small.sh"]
    assert data is not None and data["launch_files"][1] == {"name": "big", "file": None, "reason": "it fails the check"}
    text = runner.invoke(app, ["check", str(path), "--emit-dir", str(tmp_path / "out2")])
    assert text.exit_code == 1 and "no launch file for big: it fails the check" in text.stdout


def test_an_engine_without_a_command_is_said(tmp_path: Path) -> None:
    body = f"  - name: h\n    model: {LLAMA}\n    gpu: h100\n    engine: hf\n    require: {{ctx: 8k}}\n"
    code, data, _ = check(capacity(tmp_path, body), tmp_path / "out")
    assert code == 0 and not list((tmp_path / "out").iterdir())
    assert data is not None and data["launch_files"][0]["reason"].startswith("no launch command for engine hf")


def test_trtllm_file_carries_its_extra_options_block(tmp_path: Path) -> None:
    body = (
        f"  - name: t\n    model: {LLAMA}\n    gpu: h100\n    engine: trtllm\n    kv_dtype: fp8\n"
        "    require: {ctx: 8k}\n"
    )
    code, _, stderr = check(capacity(tmp_path, body), tmp_path / "out")
    assert code == 0, stderr
    text = (tmp_path / "out" / "t.sh").read_text(encoding="utf-8")
    argv = argv_of(tmp_path / "out" / "t.sh")
    assert argv[argv.index("--extra_llm_api_options") + 1] == "extra_llm_api_options.yaml"
    # llmapi KvCacheConfig.dtype 'fp8' (kvsize/launch.py KV_NAMES): the YAML block, commented, after the notes
    assert "# extra_llm_api_options.yaml:\n#   kv_cache_config:\n#     dtype: fp8\n" in text
