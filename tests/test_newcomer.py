"""What a newcomer meets first: the GitHub Action and its example workflow, the CPU verification the README
shows, a model named in several words, and the first screen of `kvsize --help`.

The action's steps run here as the runner would run them (bash, the step's `env:` with the inputs filled in,
GITHUB_ACTIONS=true, GITHUB_ACTION_PATH at the repository), except that the install step is a no-op: this
interpreter's environment already has kvsize.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_terminal import in_terminal

from kvsize.errors import UsageError
from kvsize.resolve import load_model_config
from kvsize.verify import VerifyOptions, plan

ROOT = Path(__file__).resolve().parent.parent
ACTION_FILE = ROOT / "action.yml"
WORKFLOW = ROOT / "examples" / "github" / "kvsize-capacity.yml"
INPUT = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(ACTION_FILE.read_text(encoding="utf-8"))
    return loaded


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KVSIZE_DEBUG", "HF_TOKEN", "NO_COLOR", "FORCE_COLOR")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(ROOT),
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf-home"),
        **extra,
    )
    return env


def kvsize(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args],
        capture_output=True,
        text=True,
        env=env_for(tmp_path, COLUMNS="120"),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


# --- 1. the GitHub Action -------------------------------------------------------------------------------------


def installs_kvsize_from_an_index(line: str) -> bool:
    """Whether a shell line runs `pip install` with the name kvsize (an index's package), not a path."""
    line = line.split(" #", 1)[0]
    if line.lstrip().startswith("#"):
        return False
    for command in re.split(r"&&|\|\||;|\|", line):
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        if "pip" not in " ".join(words) or "install" not in words:
            continue
        for word in words[words.index("install") + 1 :]:
            if re.fullmatch(r"kvsize(\[[^\]]*\])?([=<>~!].*)?", word, re.IGNORECASE):
                return True
    return False


def test_the_detector_tells_the_index_from_a_path() -> None:
    assert installs_kvsize_from_an_index("      - run: pip install kvsize")
    assert installs_kvsize_from_an_index('python -m pip install -q "kvsize[verify]>=0.1"')
    assert not installs_kvsize_from_an_index('.venv/bin/pip install -e ".[verify]"')
    assert not installs_kvsize_from_an_index('python -m pip install --quiet "$GITHUB_ACTION_PATH"')
    assert not installs_kvsize_from_an_index("# pip install kvsize would fail")


def shipped_lines() -> list[tuple[str, str]]:
    """(file, line) of every command a user is given to run: the action, CI, examples/ and .github/ files, and
    the README's code blocks."""
    files = [ACTION_FILE, ROOT / ".ci" / "run", *sorted((ROOT / "examples").rglob("*"))]
    files += sorted((ROOT / ".github").rglob("*")) if (ROOT / ".github").is_dir() else []
    found = [
        (str(f.relative_to(ROOT)), line)
        for f in files
        if f.is_file()
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines()
    ]
    blocks = re.findall(r"^```\w*\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), re.M | re.S)
    return found + [("README.md", line) for block in blocks for line in block.splitlines()]


def test_nothing_shipped_installs_kvsize_from_an_index() -> None:
    """kvsize is not on PyPI: `pip install kvsize` fails, or installs whoever publishes the name."""
    offenders = [(name, line.strip()) for name, line in shipped_lines() if installs_kvsize_from_an_index(line)]
    assert offenders == []


def test_action_inputs() -> None:
    inputs = action()["inputs"]
    assert inputs["capacity-file"]["required"] is True
    assert str(inputs["python-version"]["default"]) == "3.11"
    assert inputs["args"].get("required", False) is False
    used = set(INPUT.findall(ACTION_FILE.read_text(encoding="utf-8")))
    assert used <= set(inputs), used - set(inputs)
    assert {"capacity-file", "python-version", "args"} <= used


def test_action_scripts_interpolate_nothing() -> None:
    """An expression inside a `run:` script is pasted into the script before bash reads it: an input such as
    `x"; curl evil | sh; "` would run. Inputs reach scripts through `env:`."""
    steps = action()["runs"]["steps"]
    assert action()["runs"]["using"] == "composite"
    scripts = [step["run"] for step in steps if "run" in step]
    assert scripts and all("${{" not in script for script in scripts)
    assert all(step.get("shell") == "bash" for step in steps if "run" in step)


def test_action_pins_what_it_uses_and_installs_its_own_checkout() -> None:
    text = ACTION_FILE.read_text(encoding="utf-8")
    for step in action()["runs"]["steps"]:
        if "uses" in step:
            assert PINNED.match(step["uses"]), step["uses"]
            assert re.search(rf"uses: {re.escape(step['uses'])} # v\d", text), "a version comment beside the SHA"
    installs = [step["run"] for step in action()["runs"]["steps"] if "pip install" in step.get("run", "")]
    assert len(installs) == 1
    assert '"$GITHUB_ACTION_PATH"' in installs[0] and not installs_kvsize_from_an_index(installs[0])


PASSING = """deployments:
  - name: chat-8b
    model: meta-llama/Llama-3.1-8B
    gpu: h100
    require:
      ctx: 8k
      min_concurrency: 4
"""
FAILING = """deployments:
  - name: chat-8b-on-l4   # 8 requests of 128k cannot fit a 24 GB card
    model: meta-llama/Llama-3.1-8B
    gpu: l4
    require:
      ctx: 128k
      min_concurrency: 8
"""


def run_action(tmp_path: Path, inputs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The action's `run:` steps in order, as the runner runs a composite action's bash steps (`bash
    --noprofile --norc -eo pipefail FILE`, in the workspace), with the install step replaced by a no-op."""
    declared = action()["inputs"]
    values = {name: str(spec.get("default", "")) for name, spec in declared.items()} | inputs
    done: subprocess.CompletedProcess[str] | None = None
    for number, step in enumerate(action()["runs"]["steps"]):
        if "run" not in step:
            assert step["uses"].startswith("actions/setup-python@")  # this interpreter stands in for it
            continue
        script = "true" if "pip install" in step["run"] else step["run"]
        env = {}
        for key, value in (step.get("env") or {}).items():
            env[key] = INPUT.sub(lambda m: values[m.group(1)], str(value))
            assert "${{" not in env[key], f"an expression this test does not know: {value}"
        path = tmp_path / f"step-{number}.sh"
        path.write_text(script, encoding="utf-8")
        extra = {"GITHUB_ACTIONS": "true", "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_WORKSPACE": str(tmp_path)}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
            capture_output=True,
            text=True,
            env=env_for(tmp_path, **extra, **env),
            cwd=tmp_path,
            timeout=120,
        )
        if done.returncode != 0:
            break
    assert done is not None
    return done


def test_action_passes_a_capacity_file_that_fits(tmp_path: Path) -> None:
    (tmp_path / "capacity.yaml").write_text(PASSING, encoding="utf-8")
    done = run_action(tmp_path, {"capacity-file": "capacity.yaml", "args": "--junit kvsize-junit.xml"})
    assert done.returncode == 0, done.stderr
    assert "1 deployment: 1 pass, 0 fail" in done.stdout
    assert "::error" not in done.stdout + done.stderr
    assert "<testcase" in (tmp_path / "kvsize-junit.xml").read_text(encoding="utf-8")  # args reached kvsize


def test_action_fails_a_deployment_that_stopped_fitting(tmp_path: Path) -> None:
    (tmp_path / "my capacity.yaml").write_text(FAILING, encoding="utf-8")  # a space: the path stays one word
    done = run_action(tmp_path, {"capacity-file": "my capacity.yaml"})
    assert done.returncode == 1, done.stderr
    assert re.search(r"^::error file=my capacity\.yaml,line=2,.*chat-8b-on-l4", done.stdout + done.stderr, re.M)


def test_an_input_cannot_inject_commands(tmp_path: Path) -> None:
    done = run_action(tmp_path, {"capacity-file": 'x.yaml"; echo INJECTED; "', "args": "$(echo INJECTED)"})
    assert done.returncode == 2 and "INJECTED" not in (done.stdout + done.stderr).split()  # never echoed alone
    assert done.stderr.startswith("Error: ") and "$(echo" in done.stderr  # the words reached kvsize as written


def test_example_workflow_uses_the_action() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    steps = yaml.safe_load(text)["jobs"]["capacity"]["steps"]
    ours = [step for step in steps if re.match(r"^[\w.-]+/kvsize@", step.get("uses", ""))]
    assert len(ours) == 1
    assert ours[0]["uses"] == "your-org/kvsize@<commit-sha>" and "placeholder" in text  # said so in a comment
    declared = action()["inputs"]
    given = ours[0]["with"]
    assert set(given) <= set(declared)
    assert {name for name, spec in declared.items() if spec.get("required")} <= set(given)
    assert not any("run" in step for step in steps)
    for step in steps:
        if step is not ours[0] and "uses" in step:
            assert PINNED.match(step["uses"]) and f"{step['uses']} # v" in text, step["uses"]


# --- 2. verification on the CPU ---------------------------------------------------------------------------------


def cpu_plan(model: str, layers: int | None) -> None:
    plan(load_model_config(model), VerifyOptions(contexts=[128], device="cpu", layers=layers), "cpu")


def test_cpu_guard_counts_the_layers_built() -> None:
    """Qwen3-8B's embeddings and lm_head (1.2B parameters) are built whatever --layers is; two of its layers
    hold 0.4B. The guard counts the layers, so --layers 2 builds."""
    cpu_plan("Qwen/Qwen3-8B", 2)


@pytest.mark.parametrize("layers", [None, 36, 99])
def test_cpu_guard_says_what_is_true_and_its_hint_works(layers: int | None) -> None:
    with pytest.raises(UsageError) as info:
        cpu_plan("Qwen/Qwen3-8B", layers)
    message, hint = str(info.value), info.value.hint or ""
    assert "all 36 layers" in message
    assert ("is not fewer than the model has" in message) == (layers is not None)
    suggested = re.search(r"--layers (\d+)\b", hint)
    assert suggested is not None and int(suggested.group(1)) < 36, hint
    cpu_plan("Qwen/Qwen3-8B", int(suggested.group(1)))  # pasted, it works


def test_cpu_guard_suggests_no_layers_that_would_be_refused() -> None:
    """Qwen3-235B-A22B's layers hold 2.5B parameters each: no --layers fits the CPU, so the hint says meta."""
    with pytest.raises(UsageError) as info:
        cpu_plan("Qwen/Qwen3-235B-A22B", 2)
    assert "building 2 of the 94 layers" in str(info.value)
    assert "--layers" not in (info.value.hint or "") and "--device meta" in (info.value.hint or "")
    with pytest.raises(UsageError):
        cpu_plan("Qwen/Qwen3-235B-A22B", 1)


def test_cpu_refusal_is_one_error_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    done = kvsize("verify", "Qwen/Qwen3-8B", "--device", "cpu", "--ctx", "128", tmp_path=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: building all 36 layers"), done.stderr
    assert "Pass --layers 2" in lines[0]


# --- 3. a model named in several words -------------------------------------------------------------------------


@pytest.mark.parametrize("tail", [[], ["--ctx", "4k"]], ids=["alone", "with-options"])
def test_several_words_are_one_model_query(tail: list[str], tmp_path: Path) -> None:
    """README: `kvsize qwen3 235b` -> "Did you mean: Qwen/Qwen3-235B-A22B, ...", as quoted."""
    unquoted = kvsize("qwen3", "235b", *tail, tmp_path=tmp_path)
    quoted = kvsize("qwen3 235b", *tail, tmp_path=tmp_path)
    assert (unquoted.returncode, unquoted.stderr) == (quoted.returncode, quoted.stderr)
    assert unquoted.returncode == 2 and "Traceback" not in unquoted.stderr
    assert unquoted.stderr.startswith("Error: 'qwen3 235b' is not a built-in model")
    assert "Did you mean: Qwen/Qwen3-235B-A22B," in unquoted.stderr
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert '`kvsize qwen3 235b` -> "Did you mean: Qwen/Qwen3-235B-A22B, ..."' in readme


def test_a_hub_id_with_an_extra_word_is_still_an_error(tmp_path: Path) -> None:
    """A hub id or a path is one word: the word after it is named (a forgotten --ctx), not searched for."""
    done = kvsize("meta-llama/Llama-3.1-8B", "128k", tmp_path=tmp_path)
    assert done.returncode == 2 and "unexpected extra argument(s) (128k)" in done.stderr
    done = kvsize("qwen3", "235b", "--no-such-flag", tmp_path=tmp_path)
    assert done.returncode == 2 and "No such option: --no-such-flag" in done.stderr


# --- 4. the first screen ------------------------------------------------------------------------------------------

COMMANDS = ("size", "gpus", "models", "check", "schema", "plan", "verify", "log", "probe", "evict")


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
@pytest.mark.parametrize("args", [[], ["--help"], ["-h"]], ids=["bare", "--help", "-h"])
def test_overview_fits_one_screen(args: list[str], colour: bool, tmp_path: Path) -> None:
    """Bare `kvsize` is `kvsize --help`: the overview on stdout and exit 0 (asking is no error), nothing on
    stderr. One usage line, each command on one line, under 40 lines at 80 columns, and the way to every option."""
    with (tmp_path / "stderr").open("w") as stderr:
        code, screen = in_terminal(*args, colour=colour, stderr=stderr)
    assert code == 0 and (tmp_path / "stderr").read_text() == ""
    lines = screen.rstrip().splitlines()
    assert len(lines) <= 40, len(lines)
    assert all(len(line.rstrip()) <= 80 for line in lines) and "…" not in screen
    assert screen.count("Usage:") == 1 and "Usage: kvsize MODEL [OPTIONS] | COMMAND [ARGS]..." in screen
    rows = [line for line in lines if line.startswith("│ ") and not line.startswith("│ -")]
    assert [row.split()[1] for row in rows] == list(COMMANDS)  # no continuation rows: one line each
    assert re.search(r"^ Every sizing option: kvsize size --help \(or kvsize MODEL --help\) *$", screen, re.M)


def test_bare_kvsize_prints_what_help_prints(tmp_path: Path) -> None:
    assert kvsize(tmp_path=tmp_path).stdout == kvsize("--help", tmp_path=tmp_path).stdout


@pytest.mark.parametrize("args", [["size", "--help"], ["meta-llama/Llama-3.1-8B", "--help"]])
def test_every_sizing_option_is_one_command_away(args: list[str], tmp_path: Path) -> None:
    done = kvsize(*args, tmp_path=tmp_path)
    assert done.returncode == 0 and done.stdout.count("Usage:") == 1
    for text in ("─ Scenario ─", "─ GPU and budget ─", "--kv-dtype", "--gpu-util", "--cpu-mem", "--json"):
        assert text in done.stdout, text


@pytest.mark.parametrize("args", [[], ["--help"]])
def test_overview_imports_nothing_heavy(args: list[str]) -> None:
    probe = (
        "import contextlib, io, sys\nfrom kvsize.cli import main\n"
        f"sys.argv = ['kvsize', *{args!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    main()\n"
        "print([m for m in ('torch', 'transformers', 'huggingface_hub') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def test_help_kvsize_documents_the_api() -> None:
    """help(kvsize) shows how to call estimate and where its options are, not a bare __getattr__."""
    import pydoc

    import kvsize

    text = pydoc.render_doc(kvsize, renderer=pydoc.plaintext)
    assert "kvsize.estimate(" in text and "EstimateOptions" in text
    assert dir(kvsize) == ["Estimate", "__version__", "estimate"]
    # The docstring's example, run: Llama-3.1-8B at 32k is 32,768 x 131,072 B = 4 GiB per request.
    result = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx="32k", gpu="h100")
    assert result.scenarios[0].kv_cache_bytes == 32_768 * 131_072
