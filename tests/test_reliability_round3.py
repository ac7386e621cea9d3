"""Reliability round 3 (issue 18): a calibration applies only to the deployment it measured; no user text forms
a CI runner's command; one bounded YAML loader; `require:` keys read as the CLI reads them; a lost stderr keeps
the exit code. Where the stream, the file or the exit code is the point, kvsize runs as a real subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsize.calibration import (
    Calibration,
    CalibrationTarget,
    calibration_from_mapping,
    calibration_mismatches,
    same_model,
)
from kvsize.errors import ConfigError, UsageError
from kvsize.strict_yaml import load_yaml_data
from kvsize.text import CommandGuard, ci_safe, clean, json_safe

LOGS = Path(__file__).parent / "data" / "logs"
LLAMA_H100 = LOGS / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log"  # vLLM 0.19.0, tp 1, Llama-3.1-8B-Instruct
GIB = 1 << 30


def kvsize(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", **(env or {})},
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cal") / "llama8b-h100.yaml"
    done = kvsize("log", str(LLAMA_H100), "--gpu", "h100", "--save-calibration", str(path))
    assert done.returncode == 0, done.stderr
    return path


# --- a calibration is evidence about one deployment ----------------------------------------------------------


def test_saved_calibration_names_its_deployment(calibration_file: Path) -> None:
    data = yaml.safe_load(calibration_file.read_text())
    # The log's own: "model='meta-llama/Llama-3.1-8B-Instruct'", vLLM 0.19.0, tp 1; the card is --gpu h100.
    assert (data["model"], data["gpu"], data["engine"], data["engine_version"]) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "h100-sxm",
        "vllm",
        "0.19.0",
    )
    assert (data["tp"], data["pp"]) == (1, 1)


BASE = ["--ctx", "8k", "--engine-version", "0.19"]


@pytest.mark.parametrize(
    ("args", "difference"),
    [
        # The round-3 bypass: the 8B's measured weights made a 70B "fit" one H100 or one L4.
        (["meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100", *BASE], "model"),
        (["meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l4", *BASE], "card h100-sxm != l4"),
        (["meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--tp", "2", *BASE], "tp x pp 1 x 1 != 2 x 1"),
        (["meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--ctx", "8k"], "release vllm 0.19.0"),
        (["meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--engine", "sglang", "--ctx", "8k"], "engine vllm"),
        (["meta-llama/Llama-3.1-8B-Instruct", "--gpu-mem", "80GiB", *BASE], "card h100-sxm != a card given"),
    ],
)
def test_calibration_for_another_deployment_is_refused(
    calibration_file: Path, args: list[str], difference: str
) -> None:
    done = kvsize(*args, "--calibration", str(calibration_file))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("Error: calibration") and difference in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_another_organisations_copy_is_another_model(calibration_file: Path, tmp_path: Path) -> None:
    from kvsize.resolve import load_model_config

    folder = tmp_path / "unsloth" / "Llama-3.1-8B-Instruct"  # the same config, under another organisation
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(load_model_config("meta-llama/Llama-3.1-8B-Instruct").raw))
    done = kvsize(str(folder), "--gpu", "h100", *BASE, "--calibration", str(calibration_file))
    assert done.returncode == 2 and "model" in done.stderr
    mirror = tmp_path / "models" / "meta-llama" / "Llama-3.1-8B-Instruct"  # a local mirror of the hub id: it applies
    mirror.mkdir(parents=True)
    (mirror / "config.json").write_text((folder / "config.json").read_text())
    done = kvsize(str(mirror), "--gpu", "h100", *BASE, "--calibration", str(calibration_file))
    assert done.returncode == 0, done.stderr


def test_release_mismatch_names_the_release_to_pass(calibration_file: Path) -> None:
    done = kvsize(
        "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--ctx", "8k", "--calibration", str(calibration_file)
    )
    assert done.returncode == 2 and "--engine-version 0.19" in done.stderr


def test_calibration_applies_to_its_own_deployment(calibration_file: Path) -> None:
    # The same card under an alias, the model's id in another case (the hub resolves either): it applies.
    done = kvsize(
        "META-LLAMA/llama-3.1-8b-instruct", "--gpu", "H100-SXM", *BASE, "--gpu-util", "0.95",
        "--calibration", str(calibration_file), "--json",
    )  # fmt: skip
    if done.returncode == 2 and "calibration" not in done.stderr:  # the registry is case-sensitive: use its id
        done = kvsize(
            "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", *BASE, "--gpu-util", "0.95",
            "--calibration", str(calibration_file), "--json",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    budget = json.loads(done.stdout)["scenarios"][0]["gpu"]["kv_budget_bytes"]
    # ceil((85,520,809,984 - 494,927,872) x 0.95) minus the measured weights 14.99, peak 1.89, non-torch 0.25 GiB
    requested = -(-(85_520_809_984 - 494_927_872) * 95 // 100)
    assert budget == requested - round(14.99 * GIB) - round(1.89 * GIB) - round(0.25 * GIB)


def test_check_refuses_a_deployment_calibration_of_another_model(calibration_file: Path, tmp_path: Path) -> None:
    (tmp_path / "cal.yaml").write_text(calibration_file.read_text())
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(
        "deployments:\n  - name: big\n    model: meta-llama/Llama-3.1-70B-Instruct\n    gpu: h100\n"
        "    engine_version: '0.19'\n    calibration: cal.yaml\n    require: {ctx: 8k}\n"
    )
    done = kvsize("check", str(capacity))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "deployment 'big'" in done.stderr and "model" in done.stderr


def _capacity_two(tmp_path: Path) -> Path:
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(
        "deployments:\n"
        "  - name: small\n    model: meta-llama/Llama-3.1-8B-Instruct\n    gpu: h100\n"
        "    engine_version: '0.19'\n    gpu_util: 0.95\n    require: {ctx: 8k}\n"
        "  - name: big\n    model: meta-llama/Llama-3.1-70B-Instruct\n    gpu: h100\n"
        "    engine_version: '0.19'\n    require: {ctx: 8k}\n"
    )
    return capacity


def test_check_wide_calibration_applies_only_where_it_was_measured(calibration_file: Path, tmp_path: Path) -> None:
    capacity = _capacity_two(tmp_path)
    plain = json.loads(kvsize("check", str(capacity), "--json").stdout)["deployments"]
    done = kvsize("check", str(capacity), "--json", "--calibration", str(calibration_file))
    calibrated = json.loads(done.stdout)["deployments"]
    # 'small' is the measured deployment: its budget is the log's 58.11 GiB; 'big' (a 70B) is sized as without it,
    # and still does not fit one H100: the 8B's weights no longer make it "fit".
    assert abs(calibrated[0]["kv_budget_bytes"] / GIB - 58.11) < 0.02
    assert calibrated[0]["kv_budget_bytes"] != plain[0]["kv_budget_bytes"]
    assert calibrated[1] == plain[1] and not calibrated[1]["pass"]
    assert done.returncode == 1


def test_check_wide_calibration_that_matches_nothing_is_bad_input(calibration_file: Path, tmp_path: Path) -> None:
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(
        "deployments:\n  - name: big\n    model: meta-llama/Llama-3.1-70B-Instruct\n    gpu: h100\n"
        "    engine_version: '0.19'\n    require: {ctx: 8k}\n"
    )
    done = kvsize("check", str(capacity), "--calibration", str(calibration_file))
    assert done.returncode == 2 and "measured on another deployment" in done.stderr


def test_plan_uses_the_calibration_on_its_layout_only(calibration_file: Path) -> None:
    args = ["plan", "meta-llama/Llama-3.1-70B-Instruct", "--ctx", "8k", "--gpus", "h100,l4", "--engine-version", "0.19"]
    done = kvsize(*args, "--calibration", str(calibration_file))
    assert done.returncode == 2 and "model" in done.stderr  # a 70B plan from an 8B measurement: refused
    small = ["plan", "meta-llama/Llama-3.1-8B-Instruct", "--ctx", "1k", "--concurrency", "2000"]
    small += ["--gpus", "h100,l4", "--engine-version", "0.19", "--json"]
    plain = json.loads(kvsize(*small).stdout)["plans"]
    calibrated = json.loads(kvsize(*small, "--calibration", str(calibration_file)).stdout)["plans"]
    by_gpu = {p["gpu"]: p for p in calibrated}
    assert by_gpu["l4"] == {p["gpu"]: p for p in plain}["l4"]  # another card: modelled, untouched
    assert "calibrated" not in by_gpu["l4"]["reason"]


def test_log_check_refuses_a_calibration_of_another_deployment(calibration_file: Path) -> None:
    other = LOGS / "llmd-fp8dyn-llama-3-3-70b-tp2pp1dp1-8192.log"
    done = kvsize("log", str(other), "--gpu", "h100", "--calibration", str(calibration_file))
    assert done.returncode == 2 and "measured on another deployment" in done.stderr
    same = kvsize("log", str(LLAMA_H100), "--gpu", "h100", "--calibration", str(calibration_file))
    assert same.returncode == 0, same.stderr


def test_same_model_rule() -> None:
    assert same_model("meta-llama/Llama-3.1-8B", "META-LLAMA/llama-3.1-8b")
    assert same_model("/models/meta-llama/Llama-3.1-8B/", "meta-llama/Llama-3.1-8B")
    assert not same_model("meta-llama/Llama-3.1-8B", "unsloth/Llama-3.1-8B")
    assert not same_model("/models/Llama-3.1-8B", "meta-llama/Llama-3.1-8B")  # a bare name two orgs could share
    assert not same_model("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct")
    assert not same_model("org/x", "org/xx") and not same_model("a/org/x", "borg/x")


def _cal(**changes: object) -> Calibration:
    base: dict[str, object] = {
        "model": "org/m",
        "gpu": "h100",
        "engine": "vllm",
        "engine_version": "0.19.1",
        "tp": 2,
        "pp": 1,
        "activation_bytes": 1,
    }
    return Calibration(**{**base, **changes})  # type: ignore[arg-type]


def test_mismatches_by_part() -> None:
    target = CalibrationTarget(model="org/m", gpu="h100-sxm", engines=("vllm",), engine_version="0.19", tp=2, pp=1)
    assert calibration_mismatches(_cal(), target) == []
    # Releases compare by their era (kvsize/engines/vllm_releases.py): 0.19.0 and 0.19.1 are one era, so a
    # 0.19.0 calibration applies to 0.19; 0.18.1 (its own era) and 0.21.0 do not.
    assert calibration_mismatches(_cal(engine_version="0.19.0"), target) == []
    assert [m.split()[0] for m in calibration_mismatches(_cal(engine_version="0.18.1"), target)] == ["release"]
    assert [m.split()[0] for m in calibration_mismatches(_cal(engine_version="0.21.0"), target)] == ["release"]
    assert [m.split()[0] for m in calibration_mismatches(_cal(pp=2), target)] == ["tp"]
    assert [m.split()[0] for m in calibration_mismatches(_cal(gpu="h100-pcie"), target)] == ["card"]
    several = CalibrationTarget(model="org/m", gpu="h100-sxm", engines=("vllm", "sglang"), engine_version=None, tp=2)
    assert any(m.startswith("engine") for m in calibration_mismatches(_cal(engine_version="0.33"), several))


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"activation": 1}, "unknown key"),
        ({"model": None}, "names no model"),
        ({"gpu": None}, "names no GPU profile"),
        ({"engine_version": None}, "names no engine release"),
        ({"model": "org/m\u2028x"}, "one line"),
        ({"model": ""}, "one line"),
        ({"tp": True}, "tp must be"),
        ({"tp": 0}, "tp must be"),
        ({"activation_bytes": 1.5}, "whole number"),
        ({"activation_bytes": 10**400}, "whole number"),
        ({"activation_bytes": True}, "whole number"),
        ({"kvsize_calibration": 2}, "not a kvsize calibration"),
    ],
)
def test_calibration_file_fields(changes: dict[str, object], error: str) -> None:
    data = {
        "kvsize_calibration": 1,
        "model": "org/m",
        "gpu": "h100",
        "engine": "vllm",
        "engine_version": "0.19.0",
        "tp": 1,
        "pp": 1,
        "activation_bytes": 5,
        **changes,
    }
    with pytest.raises(UsageError, match=error) as caught:
        calibration_from_mapping(data, source="c.yaml")
    assert len(str(caught.value)) < 300  # no whole parsed value in the message


def test_save_calibration_needs_a_card(tmp_path: Path) -> None:
    # The log prints no device name: without --gpu the calibration could not say which card it measured.
    done = kvsize("log", str(LLAMA_H100), "--save-calibration", str(tmp_path / "c.yaml"))
    assert done.returncode == 2 and "--gpu" in done.stderr and not (tmp_path / "c.yaml").exists()


# --- one YAML loader --------------------------------------------------------------------------------------


def _alias_bomb(head: str) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return head + "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "args",
    [
        ["meta-llama/Llama-3.1-8B", "--gpu", "h100", "--ctx", "8k", "--calibration", "{file}"],
        ["meta-llama/Llama-3.1-8B", "--ctx", "8k", "--workload", "{file}"],
        ["check", "{file}"],
    ],
    ids=["calibration", "workload", "capacity"],
)
def test_alias_bomb_in_every_yaml_is_refused_at_once(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb("kvsize_calibration: 1\n" if "--calibration" in args else ""))
    assert len(path.read_bytes()) < 600
    done = kvsize(*[a.replace("{file}", str(path)) for a in args])  # 60 s timeout: a hang fails the test
    assert done.returncode == 2 and done.stderr.startswith("Error:") and "Traceback" not in done.stderr


def test_two_merge_keys_in_one_mapping_are_refused() -> None:
    text = "a: &a {x: 1}\nb: &b {x: 2}\nc:\n  <<: *a\n  <<: *b\n"
    with pytest.raises(ConfigError, match="'<<' given twice") as caught:
        load_yaml_data(text, source="f.yaml", what="file")
    assert caught.value.line == 5
    # One '<<' with a list of mappings is how YAML merges several: the first wins, as the spec says.
    assert load_yaml_data("a: &a {x: 1}\nb: &b {x: 2}\nc:\n  <<: [*a, *b]\n", source="f", what="f")["c"] == {"x": 1}


def test_capacity_file_with_two_merge_keys_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "base: &base {model: meta-llama/Llama-3.1-8B, gpu: h100}\nbig: &big {gpu: l4}\n"
        "deployments:\n  - <<: *base\n    <<: *big\n    name: d\n    require: {ctx: 8k}\n"
    )
    done = kvsize("check", str(path))
    assert done.returncode == 2 and "'<<' given twice" in done.stderr


# --- require: keys read as the CLI reads them ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "code"),
    [
        ("prefix_len", "2k", 0),
        ("prefix_len", "0", 0),
        ("prefix_len", "true", 2),
        ("prefix_len", "1.5", 2),
        ("prompt_len", "1k", 0),
        ("prompt_len", "true", 2),
        ("output_len", "0", 2),
        ("min_steady_state_concurrency", "true", 2),
        ("min_steady_state_concurrency", ".nan", 2),
        ("min_steady_state_concurrency", "1.5", 0),
    ],
)
def test_require_keys_read_like_the_cli(tmp_path: Path, key: str, value: str, code: int) -> None:
    extra = "" if key in ("prompt_len", "output_len") or "steady" not in key else ", prompt_len: 1k, output_len: 1k"
    if key in ("prompt_len",):
        extra = ", output_len: 1k"
    if key == "output_len":
        extra = ", prompt_len: 1k"
    path = tmp_path / "c.yaml"
    path.write_text(
        "deployments:\n  - name: d\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n"
        f"    require: {{ctx: 8k, {key}: {value}{extra}}}\n"
    )
    done = kvsize("check", str(path))
    assert done.returncode == code, done.stdout + done.stderr
    if code == 2:
        assert key in done.stderr and "Traceback" not in done.stderr


# --- no user text forms a CI runner's command ----------------------------------------------------------------


def test_guard_rewrites_each_trigger() -> None:
    assert ci_safe("::error::x") == "\\x3a:error::x"
    assert ci_safe("  \t::add-mask::s") == "  \t\\x3a:add-mask::s"
    assert ci_safe("\u00a0\u3000::stop-commands::t") == "\u00a0\u3000\\x3a:stop-commands::t"  # .NET TrimStart
    assert ci_safe("a ::x") == "a ::x"  # not at a line's start: no command
    assert ci_safe("x ##[command]y") == "x #\\x23[command]y"
    assert ci_safe("##vso[task.setvariable]") == "#\\x23vso[task.setvariable]"
    assert ci_safe("ok\r::e\r\n::f") == "ok\r\\x3a:e\r\n\\x3a:f"  # CR alone ends a line for the runner
    assert ci_safe("###[") == "##\\x23["


TRIGGER_TEXT = st.lists(
    st.sampled_from(["::", ":", "#", "##", "##[", "##vso[", "[", " ", "\t", "\u00a0", "\u3000", "\n", "\r", "a", "é"]),
    max_size=40,
).map("".join)


def _runner_sees_a_command(output: str) -> bool:
    import re

    return any(
        line.lstrip().startswith("::") or "##[" in line or "##vso[" in line for line in re.split(r"\r\n|\r|\n", output)
    )


@settings(max_examples=300, deadline=None)
@given(TRIGGER_TEXT, st.lists(st.integers(0, 8), max_size=20))
def test_guard_is_safe_and_the_same_however_writes_split(text: str, cuts: list[int]) -> None:
    data = text.encode()
    whole = ci_safe(text)
    assert not _runner_sees_a_command(whole)
    guard, out, position = CommandGuard(), b"", 0
    for cut in cuts:
        out += guard.feed(data[position : position + cut])
        position += cut
    out += guard.feed(data[position:]) + guard.finish()
    assert out.decode() == whole


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_clean_and_json_never_carry_a_trigger(text: str) -> None:
    assert not _runner_sees_a_command(clean(text))
    document = json_safe(json.dumps({"name": text}, indent=2))
    assert json.loads(document)["name"] == text and not _runner_sees_a_command(document)


HOSTILE_NAMES = ["::add-mask::secret", "x ##[command]rm", " ##vso[task.setvariable variable=x]1", "::stop-commands::t"]


def _hostile_capacity(tmp_path: Path) -> Path:
    path = tmp_path / "capacity.yaml"
    rows = [
        f"  - name: {json.dumps(name)}\n    model: meta-llama/Llama-3.1-8B\n    gpu: {gpu}\n"
        f"    require: {{ctx: {ctx}}}\n"
        for name, gpu, ctx in zip(
            HOSTILE_NAMES, ["h100", "l4", "h100", "l4"], ["8k", "128k", "8k", "128k"], strict=True
        )
    ]
    path.write_text("deployments:\n" + "".join(rows))
    return path


@pytest.mark.parametrize("json_output", [False, True])
def test_capacity_names_forge_no_workflow_command(tmp_path: Path, json_output: bool) -> None:
    path = _hostile_capacity(tmp_path)
    done = kvsize(
        "check", str(path), *(["--json"] if json_output else []), env={"GITHUB_ACTIONS": "true", "COLUMNS": "80"}
    )
    assert done.returncode == 1, done.stderr
    own = [line for line in done.stderr.splitlines() if line.startswith("::error ")]
    assert len(own) == 2  # kvsize's own annotations, one per failing deployment, still there
    rest = done.stdout + "\n".join(line for line in done.stderr.splitlines() if line not in own)
    assert not _runner_sees_a_command(rest)
    for line in own:  # and nothing inside them starts a second command
        assert "\n" not in line and "##[" not in line and line.count("::") >= 2
    if json_output:
        names = [d["name"] for d in json.loads(done.stdout)["deployments"]]
        assert names == HOSTILE_NAMES  # the data is intact: only its JSON spelling changes


def test_error_lines_forge_no_command(tmp_path: Path) -> None:
    done = kvsize("::warning::forged", "--ctx", "8k", env={"GITHUB_ACTIONS": "true"})
    assert done.returncode == 2 and not _runner_sees_a_command(done.stdout + done.stderr)
    path = tmp_path / "##[command]x.json"
    done = kvsize(str(path), env={"GITHUB_ACTIONS": "true"})
    assert done.returncode == 2 and not _runner_sees_a_command(done.stderr), done.stderr


def test_emoji_codes_in_names_stay_text(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "deployments:\n  - name: ':secret: :thumbs_up:'\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n"
        "    require: {ctx: 8k}\n"
    )
    done = kvsize("check", str(path))
    assert done.returncode == 0 and ":secret: :thumbs_up:" in done.stdout and "\u3299" not in done.stdout


# --- a lost stderr keeps the exit code ----------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["nosuch-org/nosuch-model-xyz", "--ctx", "8k"], 3),
        (["meta-llama/Llama-3.1-8B", "--ctx", "-1"], 2),
        (["meta-llama/Llama-3.1-8B", "--gpu", "nope"], 2),
    ],
)
def test_stderr_on_a_full_disk_keeps_the_exit_code(args: list[str], code: int) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "kvsize", *args],
            stdout=subprocess.PIPE,
            stderr=full,
            timeout=60,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    assert done.returncode == code


# --- calibration files, fuzzed -------------------------------------------------------------------------------

HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", " ", "\u2028", "::error::x", "##[x", "0.19.0", "h100", "org/m", "vllm", "1k"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
CAL_KEYS = st.sampled_from(
    ["kvsize_calibration", "model", "gpu", "engine", "engine_version", "tp", "pp", "activation_bytes",
     "non_torch_bytes", "cuda_graph_bytes", "weights_per_rank_bytes", "source", "extra"]
)  # fmt: skip
VALID = {"kvsize_calibration": 1, "model": "org/m", "gpu": "h100", "engine_version": "0.19.0"}


def _fuzz_calibration(changes: dict[str, object]) -> None:
    try:
        cal = calibration_from_mapping({**VALID, **changes}, source="c.yaml")
    except UsageError as exc:
        assert len(str(exc)) < 400 and "\n" not in str(exc)
        return
    # Accepted: every figure a whole number of bytes, every name one clean line, tp and pp counts.
    for key in ("activation_bytes", "non_torch_bytes", "cuda_graph_bytes", "weights_per_rank_bytes"):
        value = getattr(cal, key)
        assert value is None or (type(value) is int and 0 <= value <= 1 << 50)
    assert type(cal.tp) is int and type(cal.pp) is int and cal.tp >= 1 and cal.pp >= 1
    for text in (cal.model, cal.gpu, cal.engine, cal.engine_version):
        assert isinstance(text, str) and text == clean(text) and text.strip()
    target = CalibrationTarget(model="org/m", gpu="h100-sxm", engines=("vllm",), engine_version=None)
    calibration_mismatches(cal, target)  # comparing never raises anything but a KvsizeError


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(CAL_KEYS, HOSTILE_VALUES, max_size=6))
def test_calibration_mapping_fuzz(changes: dict[str, object]) -> None:
    with contextlib.suppress(UsageError):  # an engine release kvsize does not model, met while comparing
        _fuzz_calibration(changes)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None)
@given(st.dictionaries(CAL_KEYS, HOSTILE_VALUES, max_size=8))
def test_calibration_mapping_fuzz_long(changes: dict[str, object]) -> None:
    with contextlib.suppress(UsageError):
        _fuzz_calibration(changes)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(TRIGGER_TEXT, st.lists(st.integers(0, 8), max_size=40))
def test_guard_split_invariance_long(text: str, cuts: list[int]) -> None:
    test_guard_is_safe_and_the_same_however_writes_split.hypothesis.inner_test(text, cuts)  # type: ignore[attr-defined]


# --- config.json: a key given twice (round 2's open item) --------------------------------------------------


def test_config_key_given_twice_with_different_values_is_refused(tmp_path: Path) -> None:
    base = (
        '"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, '
        '"intermediate_size": 14336, "vocab_size": 128256'
    )
    path = tmp_path / "config.json"
    path.write_text("{" + base + ', "num_key_value_heads": 8, "num_key_value_heads": 32}')
    done = kvsize(str(path), "--ctx", "8k")
    assert done.returncode == 2 and "'num_key_value_heads' is given twice" in done.stderr
    assert "(8, then 32)" in done.stderr
    path.write_text("{" + base + ', "num_key_value_heads": 8, "num_key_value_heads": 8}')  # the same value: harmless
    done = kvsize(str(path), "--ctx", "8k", "--json")
    # 2 x 32 layers x 8 kv heads x 128 head dim x 2 bytes (bf16: no torch_dtype, kvsize's default) per token
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scenarios"][0]["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2


def test_a_deployment_names_one_engine(tmp_path: Path) -> None:
    # 'engine: all' used to be judged on its first engine alone, without a word.
    for engine in ("all", "vllm,sglang"):
        path = tmp_path / "c.yaml"
        path.write_text(
            f"deployments:\n  - name: d\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n    engine: '{engine}'\n"
            "    require: {ctx: 8k}\n"
        )
        done = kvsize("check", str(path))
        assert done.returncode == 2 and "one engine" in done.stderr and "line 5" in done.stderr


# --- the hostile rerun's finds -------------------------------------------------------------------------------


def test_a_folder_named_like_the_measured_model_is_judged_by_its_weights(
    calibration_file: Path, tmp_path: Path
) -> None:
    from kvsize.resolve import load_model_config

    # A 70B's config under the 8B's name: the name matches, the weights (131 GiB against 14.99) do not.
    folder = tmp_path / "evil" / "meta-llama" / "Llama-3.1-8B-Instruct"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(load_model_config("meta-llama/Llama-3.3-70B-Instruct").raw))
    done = kvsize(str(folder), "--gpu", "h100", *BASE, "--calibration", str(calibration_file))
    assert done.returncode == 2 and "weights 14.99 GiB measured" in done.stderr, done.stdout + done.stderr


def test_log_check_judges_the_calibration_against_the_config_given(calibration_file: Path) -> None:
    done = kvsize(
        "log", str(LLAMA_H100), "--gpu", "h100", "--config", "meta-llama/Llama-3.3-70B-Instruct",
        "--calibration", str(calibration_file),
    )  # fmt: skip
    assert done.returncode == 2 and "model meta-llama/Llama-3.1-8B-Instruct != meta-llama/Llama-3.3-70B" in done.stderr


@pytest.mark.parametrize("command", ["plan", "log", "check"])
def test_an_empty_calibration_path_is_refused(command: str, tmp_path: Path) -> None:
    capacity = tmp_path / "c.yaml"
    capacity.write_text(
        "deployments:\n  - name: d\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n    require: {ctx: 8k}\n"
    )
    target = {"plan": ["meta-llama/Llama-3.1-8B", "--ctx", "1k"], "log": [str(LLAMA_H100)], "check": [str(capacity)]}
    done = kvsize(command, *target[command], "--calibration", "")
    assert done.returncode == 2 and "empty path" in done.stderr


@pytest.mark.parametrize(
    ("changes", "error"),
    [({"engine_version": "zzz"}, "release number"), ({"kvsize_calibration": True}, "not a kvsize calibration")],
)
def test_calibration_release_and_marker_are_typed(changes: dict[str, object], error: str) -> None:
    data = {**VALID, "activation_bytes": 1, **changes}
    with pytest.raises(UsageError, match=error):
        calibration_from_mapping(data, source="c.yaml")


def test_guard_skips_colour_codes_at_a_line_start() -> None:
    assert ci_safe("\x1b[2m::error::B") == "\x1b[2m\\x3a:error::B"  # a viewer that strips colour sees '::'
    assert ci_safe("\x1b[1;31m \u00a0::x") == "\x1b[1;31m \u00a0\\x3a:x"
    data = b"\x1b[2m::error::B\n"
    for cut in range(len(data)):  # an escape sequence cut between two writes is still seen whole
        guard = CommandGuard()
        assert guard.feed(data[:cut]) + guard.feed(data[cut:]) + guard.finish() == b"\x1b[2m\\x3a:error::B\n"


def test_a_wrapped_path_with_colour_forces_no_command(tmp_path: Path) -> None:
    import re

    folder = tmp_path / "x ::error::B"
    folder.mkdir()
    (folder / "config.json").write_text(
        (Path(__file__).parent.parent / "examples" / "configs" / "acme-chat-3b" / "config.json").read_text()
    )
    done = kvsize(str(folder), "--ctx", "8k", env={"GITHUB_ACTIONS": "true", "COLUMNS": "80", "FORCE_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    plain = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", done.stdout + done.stderr)
    assert not _runner_sees_a_command(plain) and not _runner_sees_a_command(done.stdout)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_both_streams_full_is_exit_3() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "kvsize", "gpus"], stdout=full, stderr=full, timeout=60, env=os.environ.copy()
        )
    assert done.returncode == 3
