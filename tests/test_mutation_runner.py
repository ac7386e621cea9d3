"""benchmarks/mutants.py, the mutation runner: its operators on small snippets (fast), and one real run on two
mutants of one module (slow: the slow job runs it, `pytest -m slow`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("kvsize_mutants", ROOT / "benchmarks" / "mutants.py")
assert _spec is not None and _spec.loader is not None
mutants = importlib.util.module_from_spec(_spec)
sys.modules["kvsize_mutants"] = mutants
_spec.loader.exec_module(mutants)

SNIPPET = """\
from __future__ import annotations


def f(a: int, b: int = 3) -> bool:
    return a < b and not a


def g(x: int) -> int:
    return max(x, 0) + 2
"""


def test_every_operator_and_nothing_in_annotations() -> None:
    found = {(m.line, m.op, m.after) for m in mutants.enumerate_mutants("m.py", SNIPPET)}
    assert found == {
        (4, "3 -> 4", "4"),
        (4, "3 -> 2", "2"),  # the default, not the annotations
        (5, "return x -> not x", "return not (a < b and (not a))"),
        (5, "and -> or", "a < b or not a"),
        (5, "< -> <=", "a <= b"),
        (5, "not x -> x", "a"),
        (9, "+ -> -", "max(x, 0) - 2"),
        (9, "max(...) -> arg 0", "x"),
        (9, "max(...) -> arg 1", "0"),
        (9, "0 -> 1", "1"),
        (9, "0 -> -1", "-1"),
        (9, "2 -> 3", "3"),
        (9, "2 -> 1", "1"),
    }


def test_mutated_source_changes_one_site() -> None:
    [flip] = [m for m in mutants.enumerate_mutants("m.py", SNIPPET) if m.op == "< -> <="]
    text = mutants.mutated_source(SNIPPET, flip)
    assert "a <= b" in text and text.count("<") == 1
    namespace: dict[str, object] = {}
    exec(compile(text, "m.py", "exec"), namespace)
    assert namespace["f"](3, 3) is False  # type: ignore[operator]  # 3 <= 3 and not 3: False (0 < 3 short of it)


@pytest.mark.slow
def test_two_mutants_of_the_scheduler_run(tmp_path: Path) -> None:
    report = tmp_path / "mutants.json"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "mutants.py"),
        "--modules",
        "kvsize/engines/vllm_scheduler.py",
        "--per-module",
        "2",
        "--seed",
        "1",
        "--json",
        str(report),
        "--quiet",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [module] = json.loads(report.read_text(encoding="utf-8"))
    assert module["baseline"] == "pass", done.stderr
    assert len(module["mutants"]) == 2
    assert {m["status"] for m in module["mutants"]} <= {"killed", "survived", "timeout"}
    # The same seed samples the same mutants.
    again = subprocess.run([*cmd[:2], *cmd[2:-4], "--list"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert [line.split()[0] for line in again.stdout.splitlines()] == [m["id"] for m in module["mutants"]]
