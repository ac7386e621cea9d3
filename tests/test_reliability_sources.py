"""The sources kvsize reads besides a user's config: the built-in registry and its maintainer tool
(kvsize/models/add.py), safetensors headers (local files and the hub's), and the GPU profiles. Each bad source
is one clear outcome: a one-line error naming the file (exit 2), or, for the hub's weights, a visible note and
the config's count. Where the exit code or the stream is the point, a real process runs, with a timeout.

Runs that must see a changed registry or profile folder use a copy of the package in a temporary folder (the
registry and the profiles are found beside the module: kvsize/registry.py `_models_dir`, kvsize/profiles.py
`profiles_dir`), run from that folder so that `python -m` imports the copy. The hub is a loopback stand-in
(tests/hub_standin.py) serving malformed safetensors headers; nothing reaches the network.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hub_standin import CONFIG, StandInHub, _handler, running_hub
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_reliability_io import one_error

from kvsize import registry
from kvsize.config import parse_config
from kvsize.errors import ConfigError, KvsizeError
from kvsize.models.add import SOURCES_HEADER, plan_add, registry_line
from kvsize.params import estimate_parameters
from kvsize.text import _UNSAFE

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "kvsize" / "models"
TIMEOUT = 60
SOURCE = ["acme/configs", "models/config.json", "0" * 40, "copied by hand and checked"]
EXISTING = "Qwen/Qwen3-8B"  # a registry entry: its case variants must be refused


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVSIZE_")) and "PROXY" not in k.upper()}
    env.update(HF_HUB_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT), **extra)
    return env


def run(
    module: str, *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """`python -m module args` in `cwd` (a package copy's folder runs that copy)."""
    env = env or base_env()
    if cwd != ROOT:
        env = {**env, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def package_copy(root: Path, *, wheel_layout: bool = False) -> Path:
    """kvsize (and its GPU profiles, where a checkout or a wheel keeps them) copied under `root`."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "kvsize", root / "kvsize", ignore=ignore)
    profiles = root / "kvsize" / "gpu_profiles" if wheel_layout else root / "gpu_profiles"
    shutil.copytree(ROOT / "gpu_profiles", profiles, ignore=ignore)
    return root


def models_copy(root: Path) -> Path:
    """registry.jsonl and SOURCES.tsv copied to `root` (the add tool's --models-dir)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("registry.jsonl", "SOURCES.tsv"):
        shutil.copyfile(MODELS / name, root / name)
    return root


def snapshot(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in ("registry.jsonl", "SOURCES.tsv")}


def add_tool(models: Path | None, hub_id: str, config_file: Path, *extra: str, cwd: Path = ROOT) -> Any:
    return run(
        "kvsize.models.add",
        hub_id,
        str(config_file),
        *("--source-repo", SOURCE[0], "--source-path", SOURCE[1], "--source-commit", SOURCE[2], "--notes", SOURCE[3]),
        *(("--models-dir", str(models)) if models is not None else ()),
        *extra,
        cwd=cwd,
    )


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


# --- 1. the registry tool refuses what no lookup could read, and writes nothing -----------------------------

# (hub id, family or None for the guess, config, what the error says)
REFUSED: list[tuple[str, str | None, Any, str]] = [
    ("acme/tiny-1", None, {**CONFIG, "notes": "line\u2028separator"}, "line-separator"),
    ("acme/tiny-1", None, {**CONFIG, "notes": "next\x85line"}, "line-separator"),
    ("acme/tiny-1", None, {**CONFIG, "bidi\u202ekey": 1}, "not plain text"),
    ("acme/tiny-1", None, {**CONFIG, "text_config": {"x": ["ok", "esc\x1b[2J"]}}, "config.text_config.x[1]"),
    ("acme/tiny-1", "Fam\u2029ily", CONFIG, "family"),
    ("acme/tiny-1", "", CONFIG, "family"),
    ("acme/tiny-1", 'Fa"mily', CONFIG, "family"),
    ("", None, CONFIG, "not shaped org/name"),
    ("acme/tiny 1", None, CONFIG, "not shaped org/name"),
    (" acme/tiny-1", None, CONFIG, "not shaped org/name"),
    ("acme/tiny-1\u2028", None, CONFIG, "not shaped org/name"),
    ("tiny-1", None, CONFIG, "not shaped org/name"),
    ("acme/x/tiny-1", None, CONFIG, "not shaped org/name"),
    ("acme/tiny--1", None, CONFIG, "not shaped org/name"),
    ("acme/tiny-1.json", None, CONFIG, "ends in 'json'"),
    ("acme/tïny-1", None, CONFIG, "not shaped org/name"),
    (EXISTING.upper(), None, CONFIG, "differs only in case"),
    ("acme/tiny-1", None, {**CONFIG, "num_hidden_layers": "many"}, "num_hidden_layers"),
    ("acme/tiny-1", None, {**CONFIG, "num_attention_heads": 0}, "num_attention_heads"),
    ("acme/tiny-1", None, {**CONFIG, "model_type": "llama\u2028"}, "model_type"),
    ("acme/tiny-1", None, [CONFIG], "JSON object"),
]


@pytest.mark.parametrize(("hub_id", "family", "config", "needle"), REFUSED, ids=[repr(r[:2]) for r in REFUSED])
def test_plan_add_refuses_entries_no_lookup_could_read(
    hub_id: str, family: str | None, config: Any, needle: str
) -> None:
    registry_text = (MODELS / "registry.jsonl").read_text(encoding="utf-8")
    sources_text = (MODELS / "SOURCES.tsv").read_text(encoding="utf-8")
    with pytest.raises(KvsizeError) as info:
        plan_add(hub_id, family if family is not None else "Acme", config, SOURCE, registry_text, sources_text)
    assert needle in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


SUBPROCESS_SAMPLE = [0, 4, 7, 8, 16, 17, 20]  # a line separator, a bad family, an empty id, spaces, case, parser


@pytest.mark.parametrize("case", SUBPROCESS_SAMPLE, ids=[repr(REFUSED[i][:2]) for i in SUBPROCESS_SAMPLE])
def test_the_add_tool_refuses_with_one_error_line_and_writes_nothing(tmp_path: Path, case: int) -> None:
    hub_id, family, config, needle = REFUSED[case]
    models = models_copy(tmp_path / "models")
    before = snapshot(models)
    extra = ("--family", family) if family is not None else ()
    line = one_error(add_tool(models, hub_id, write_json(tmp_path / "config.json", config), *extra))
    assert needle in line
    assert snapshot(models) == before
    assert sorted(p.name for p in models.iterdir()) == ["SOURCES.tsv", "registry.jsonl"]  # no temporary left


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b'{"model_type": "llama",', b"not valid JSON"), (b"\xff\xfe{}", b"not UTF-8"), (None, b"cannot read it")],
    ids=["truncated", "utf16", "missing"],
)
def test_the_add_tool_reports_an_unreadable_config_file(tmp_path: Path, content: bytes | None, needle: bytes) -> None:
    models = models_copy(tmp_path / "models")
    config = tmp_path / "config.json"
    if content is not None:
        config.write_bytes(content)
    line = one_error(add_tool(models, "acme/tiny-1", config))
    assert needle.decode() in line and snapshot(models) == snapshot(models_copy(tmp_path / "fresh"))


def test_the_add_tool_usage_errors_are_one_line(tmp_path: Path) -> None:
    proc = run("kvsize.models.add", "acme/tiny-1", cwd=ROOT)  # the config and the provenance are missing
    assert "required" in one_error(proc)


def test_an_accepted_entry_is_found_by_every_later_lookup(tmp_path: Path) -> None:
    """Added through the tool into a package copy, then looked up as users do: sized with a card, listed, found
    by a loose name, and re-added (replaced in place, not duplicated)."""
    root = package_copy(tmp_path / "pkg")
    config = write_json(tmp_path / "config.json", {**CONFIG, "note": "Ünïcode text is fine"})
    proc = add_tool(None, "acme/Tiny-Llama-1", config, "--family", "Acme", cwd=root)
    assert proc.returncode == 0, proc.stderr
    sized = run("kvsize", "acme/tiny-llama-1", "--ctx", "4k", "--gpu", "h100", "--json", cwd=root)
    assert sized.returncode == 0, sized.stderr[-2000:]
    scenario = json.loads(sized.stdout)["scenarios"][0]
    assert scenario["kv_cache_bytes"] == 2048 * 4096  # hub_standin.CONFIG: 2,048 B per token
    listed = run("kvsize", "models", "--family", "acme", "--json", cwd=root)
    assert [m["hub_id"] for m in json.loads(listed.stdout)["models"]] == ["acme/Tiny-Llama-1"], listed.stderr
    lines = (root / "kvsize" / "models" / "registry.jsonl").read_text(encoding="utf-8").split("\n")
    again = add_tool(None, "acme/Tiny-Llama-1", config, "--family", "Acme", cwd=root)
    assert again.returncode == 0, again.stderr
    assert (root / "kvsize" / "models" / "registry.jsonl").read_text(encoding="utf-8").split("\n") == lines


# --- 1b. the registry reader: a bad line is one error naming registry.jsonl:line ----------------------------


def _append(root: Path, text: str) -> int:
    path = root / "kvsize" / "models" / "registry.jsonl"
    body = path.read_text(encoding="utf-8")
    path.write_text(body + text, encoding="utf-8")
    return body.count("\n") + 1


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json at all\n", "must start with"),
        ('{"hub_id": "Qwen/QWEN3-8B", "family": "Qwen 3", "config": {}}\n', "repeats line"),
        ('{"hub_id": "acme/x y", "family": "A", "config": {}}\n', "not shaped org/name"),
        ("\n", "must start with"),
    ],
    ids=["garbage", "case-duplicate", "bad-id", "empty-line"],
)
def test_a_damaged_registry_line_is_one_error_naming_it(tmp_path: Path, line: str, needle: str) -> None:
    root = package_copy(tmp_path / "pkg")
    number = _append(root, line)
    error = one_error(run("kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "4k", cwd=root))
    assert f"registry.jsonl:{number}" in error and needle in error


def test_a_line_separator_written_by_the_old_tool_breaks_only_its_own_entry(tmp_path: Path) -> None:
    """json.dumps(ensure_ascii=False) writes U+2028 raw, and str.splitlines split the file there: every lookup
    failed. The reader now splits at '\\n' only; the entry itself is refused, named by its line."""
    root = package_copy(tmp_path / "pkg")
    raw = json.dumps(
        {"hub_id": "acme/sep", "family": "Acme", "config": {**CONFIG, "n": "a\u2028b"}}, ensure_ascii=False
    )
    number = _append(root, raw + "\n")
    assert "\u2028" in raw
    assert run("kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "4k", cwd=root).returncode == 0
    error = one_error(run("kvsize", "acme/sep", "--ctx", "4k", cwd=root))
    assert f"registry.jsonl:{number}" in error and "line-separator" in error


def test_registry_reader_functions_are_pure_over_lines() -> None:
    good = registry_line("acme/a", "Acme", CONFIG)
    assert registry.split_lines(good + "\n") == (good,)
    assert registry.split_lines("a\u2028b\x85c\n") == ("a\u2028b\x85c",)
    entry, config = registry.validate_entry(good, 7)
    assert (entry.hub_id, entry.family, entry.line, config) == ("acme/a", "Acme", 7, CONFIG)
    with pytest.raises(ConfigError, match=r"registry\.jsonl:3: .*without escapes"):
        registry.validate_entry(good.replace('"config"', '"hub_id": "x", "config"'), 3)
    with pytest.raises(ConfigError, match=r"registry\.jsonl:2: hub id 'acme/A' repeats line 1"):
        registry.read_entries([good, registry_line("acme/A", "Acme", CONFIG)])


# --- 2. hub safetensors headers that are not a header -----------------------------------------------------


def _prefix(header: bytes, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(header) if length is None else length) + header


_TENSOR = {"dtype": "BF16", "shape": [1000, 1000], "data_offsets": [0, 2_000_000]}
BAD_HUB_HEADERS: dict[str, bytes] = {
    "st-list": _prefix(b'[{"dtype": "BF16"}]'),
    "st-number": _prefix(b"42"),
    "st-zero": _prefix(b"", 0),
    "st-past": _prefix(b'{"w": {}}', 200_000),  # past the file (and past huggingface_hub's first 100 kB range)
    "st-negative": _prefix(b"{}", 2**64 - 1),  # -1 as a signed length
    "st-short": b"\x05\x00\x00",
    "st-nonutf8": _prefix(json.dumps({"w": {**_TENSOR, "shape": ["@@"]}}).encode().replace(b'"@@"', b"100\xff")),
    "st-shape-text": _prefix(json.dumps({"w": {**_TENSOR, "shape": "abc"}}).encode()),
    "st-tensor-list": _prefix(json.dumps({"w": [1, 2]}).encode()),
    "st-dtype-list": _prefix(json.dumps({"w": {**_TENSOR, "dtype": ["BF16"]}}).encode()),
    "st-span": _prefix(json.dumps({"w": {**_TENSOR, "data_offsets": [0, 7]}}).encode()),
    "st-negative-shape": _prefix(json.dumps({"w": {**_TENSOR, "shape": [-1000, 1000]}}).encode()),
}


def _bad_header_handler(hub: StandInHub) -> type[BaseHTTPRequestHandler]:
    """hub_standin's handler, with BAD_HUB_HEADERS served as those repos' model.safetensors."""
    base = _handler(hub)

    class Handler(base):  # type: ignore[valid-type, misc]
        def _route(self) -> None:
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) >= 5 and parts[-1] == "model.safetensors" and parts[1] in BAD_HUB_HEADERS:
                hub.requests.append((self.command, self.path))
                self._file(BAD_HUB_HEADERS[parts[1]])
            else:
                super()._route()

    return Handler


def bad_header_hub() -> AbstractContextManager[StandInHub]:
    return running_hub(_bad_header_handler)


def hub_env(hub: StandInHub, tmp_path: Path) -> dict[str, str]:
    env = base_env(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
    env.pop("HF_HUB_OFFLINE")  # this process only: it talks to the loopback stand-in
    return env


def test_every_bad_hub_header_is_a_kvsize_error_naming_the_repo(tmp_path: Path) -> None:
    """fetch_weights_from_hub itself: a KvsizeError (ConfigError, or ModelNotFound for what huggingface_hub
    reports as unparsable) naming the repo, never another exception. One process for all the repos."""
    script = (
        "import json, sys\n"
        "from kvsize.hub import fetch_weights_from_hub\n"
        "from kvsize.errors import KvsizeError\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        out[name] = ['ok', fetch_weights_from_hub('standin/' + name)]\n"
        "    except KvsizeError as exc:\n"
        "        out[name] = [type(exc).__name__, str(exc)]\n"
        "print(json.dumps(out))\n"
    )
    with bad_header_hub() as hub:
        env = hub_env(hub, tmp_path)
        proc = subprocess.run(
            [sys.executable, "-c", script, *BAD_HUB_HEADERS, "ok"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = json.loads(proc.stdout)
    assert answers.pop("ok") == ["ok", {"BF16": 1_000_000}]
    for name, (kind, message) in answers.items():
        assert kind in ("ConfigError", "ModelNotFound"), (name, kind, message)
        assert f"standin/{name}" in message, (name, message)
    assert "JSON list" in answers["st-list"][1] or "'list'" in answers["st-list"][1]
    assert "do not span" in answers["st-nonutf8"][1]  # huggingface_hub dropped the \xff; the span check did not
    assert "not whole numbers" in answers["st-shape-text"][1]  # huggingface_hub had counted it as 1 parameter


@pytest.mark.parametrize("name", ["st-list", "st-zero", "st-past", "st-nonutf8", "st-tensor-list"])
def test_a_bad_hub_header_falls_back_to_the_config_count_with_a_note(tmp_path: Path, name: str) -> None:
    with bad_header_hub() as hub:
        proc = run("kvsize", f"standin/{name}", "--ctx", "4k", "--gpu", "h100", env=hub_env(hub, tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    out = " ".join(proc.stdout.split())
    assert "hub safetensors metadata unavailable" in out and "estimate" in out, out[-1500:]


def test_hub_tensor_checks_are_pure() -> None:
    from kvsize.hub import _parameter_counts, _tensor_elements

    assert _tensor_elements("BF16", [2, 3], (0, 12)) == 6
    assert _tensor_elements("F4", [2, 3], (0, 3)) == 6  # a dtype kvsize does not size: offsets not checked
    assert _tensor_elements("BF16", [], (0, 2)) == 1  # a scalar
    for dtype, shape, offsets in [
        ("BF16", [2, 3], (0, 11)),
        ("BF16", [True, 3], (0, 6)),
        ("BF16", [2.0, 3], (0, 12)),
        ("BF16", "23", (0, 12)),
        ("BF16", [2, 3], (12, 0)),
        ("bf16; rm", [2, 3], (0, 12)),
        (None, [2, 3], (0, 12)),
        ("BF16", [2**40, 2**40], (0, 2**81)),
    ]:
        assert isinstance(_tensor_elements(dtype, shape, offsets), str), (dtype, shape, offsets)
    files = {
        "a.safetensors": SimpleNamespace(tensors={"t": SimpleNamespace(dtype="BF16", shape=[4], data_offsets=(0, 8))})
    }
    assert _parameter_counts("acme/x", files) == {"BF16": 4}
    files["b.safetensors"] = SimpleNamespace(
        tensors={"u": SimpleNamespace(dtype="BF16", shape="4", data_offsets=(0, 8))}
    )
    with pytest.raises(ConfigError, match=r"'acme/x': b\.safetensors on the hub has an unusable safetensors header"):
        _parameter_counts("acme/x", files)


# --- 3. a corrupt local model.safetensors is an error naming it, never skipped ------------------------------

BAD_LOCAL_FILES: dict[str, tuple[bytes, str]] = {
    "json-list": (_prefix(b"[1, 2, 3]") + b"\0" * 16, "JSON list"),
    "json-number": (_prefix(b"7 ") + b"\0" * 16, "JSON number"),
    "json-null": (_prefix(b"null") + b"\0" * 16, "JSON null"),
    "zero-length": (_prefix(b"", 0) + b"{}", "header length 0"),
    "past-the-end": (_prefix(b"{}", 4096), "header length 4,096"),
    "negative": (_prefix(b"{}", 2**64 - 16), "does not fit"),
    "huge": (_prefix(b"{}", 200 * 1024 * 1024), "does not fit"),
    "not-utf8": (_prefix(b'{"w\xff": {}}'), "not UTF-8 (byte 11)"),
    "not-json": (_prefix(b"{'w': 1}"), "not valid JSON"),
    "tiny": (b"\x01\x02\x03", "only 3 bytes"),
    "empty": (b"", "only 0 bytes"),
}


@pytest.mark.parametrize("case", sorted(BAD_LOCAL_FILES))
def test_a_corrupt_local_safetensors_header_is_a_config_error(tmp_path: Path, case: str) -> None:
    from kvsize.resolve import load_model_config
    from kvsize.weights import find_weights, safetensors_data_bytes

    content, needle = BAD_LOCAL_FILES[case]
    write_json(tmp_path / "config.json", CONFIG)
    (tmp_path / "model.safetensors").write_bytes(content)
    with pytest.raises(ConfigError) as info:
        safetensors_data_bytes(tmp_path / "model.safetensors")
    assert needle in str(info.value) and str(tmp_path / "model.safetensors") in str(info.value)
    assert info.value.hint is not None and "--weights-mem" in info.value.hint
    with pytest.raises(ConfigError):  # not skipped for another source
        find_weights(load_model_config(str(tmp_path)))


@pytest.mark.parametrize("case", ["json-list", "past-the-end", "not-utf8"])
def test_a_corrupt_local_safetensors_stops_a_run_with_one_line(tmp_path: Path, case: str) -> None:
    write_json(tmp_path / "config.json", CONFIG)
    (tmp_path / "model.safetensors").write_bytes(BAD_LOCAL_FILES[case][0])
    line = one_error(run("kvsize", str(tmp_path), "--ctx", "4k", "--gpu", "h100"))
    assert "model.safetensors" in line and BAD_LOCAL_FILES[case][1] in line and "--weights-mem" in line
    given = run("kvsize", str(tmp_path), "--ctx", "4k", "--gpu", "h100", "--weights-mem", "1GiB")
    assert given.returncode == 0, given.stderr  # the way past it that the hint names: the file is not read


@pytest.mark.parametrize(
    ("index", "needle"),
    [("{not json", "not valid JSON"), ("[]", "JSON object"), ('{"metadata": [1]}', "JSON object")],
)
def test_a_corrupt_local_index_is_an_error_not_skipped(tmp_path: Path, index: str, needle: str) -> None:
    write_json(tmp_path / "config.json", CONFIG)
    (tmp_path / "model.safetensors.index.json").write_text(index, encoding="utf-8")
    line = one_error(run("kvsize", str(tmp_path), "--ctx", "4k", "--gpu", "h100"))
    assert "model.safetensors.index.json" in line and needle in line


def test_an_index_without_a_total_still_counts_the_headers(tmp_path: Path) -> None:
    from kvsize.resolve import load_model_config
    from kvsize.weights import find_weights

    write_json(tmp_path / "config.json", CONFIG)
    write_json(tmp_path / "model.safetensors.index.json", {"weight_map": {"w": "model.safetensors"}})
    (tmp_path / "model.safetensors").write_bytes(_prefix(json.dumps({"w": _TENSOR}).encode()) + b"\0" * 2_000_000)
    weights = find_weights(load_model_config(str(tmp_path)))
    assert weights.bytes == 2_000_000 and "headers" in weights.source


# --- 4. GPU profile files are read through kvsize.safe_io: a FIFO is refused at once -------------------------


@pytest.mark.parametrize("wheel_layout", [False, True], ids=["checkout", "wheel"])
@pytest.mark.parametrize("name", ["index.json", "h100-sxm.yaml"])
def test_a_fifo_in_the_profiles_folder_is_refused_not_waited_on(tmp_path: Path, name: str, wheel_layout: bool) -> None:
    root = package_copy(tmp_path / "pkg", wheel_layout=wheel_layout)
    folder = root / "kvsize" / "gpu_profiles" if wheel_layout else root / "gpu_profiles"
    (folder / name).unlink()
    os.mkfifo(folder / name)
    for args in (["gpus"], ["meta-llama/Llama-3.1-8B", "--ctx", "4k", "--gpu", "h100"]):
        line = one_error(run("kvsize", *args, cwd=root, timeout=30))
        assert name in line and "named pipe" in line and str(folder.resolve()) in line


def test_a_profile_linked_to_a_device_is_refused(tmp_path: Path) -> None:
    from kvsize.profiles import load_profiles

    shutil.copyfile(ROOT / "gpu_profiles" / "h100-sxm.yaml", tmp_path / "h100-sxm.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=r"zero\.yaml: the GPU profile is a device"):
        load_profiles(tmp_path)
    (tmp_path / "zero.yaml").unlink()
    (tmp_path / "index.json").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=r"index\.json: the GPU profile index is a device") as info:
        load_profiles(tmp_path)
    assert info.value.hint is not None and "python -m kvsize.profiles" in info.value.hint


def test_profile_yaml_goes_through_the_bounded_loader(tmp_path: Path) -> None:
    from kvsize.profiles import load_profiles

    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(7)
    )
    (tmp_path / "bomb.yaml").write_text(bomb, encoding="utf-8")
    with pytest.raises(ConfigError, match="alias"):
        load_profiles(tmp_path)
    (tmp_path / "bomb.yaml").write_bytes(b"id: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_profiles(tmp_path)


# --- 5. property: any entry is refused with a KvsizeError, or read back by every lookup ----------------------

HOSTILE = "\udc80\u2028\u2029\x85\x00\x1b\x7f\x9b\u202e\u2066\ufeff\ufffe\t\n\r \"'\\/.-_"
texts = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(HOSTILE), max_size=24)
valid_ids = st.from_regex(registry._HUB_ID, fullmatch=True)
plain_texts = st.text(alphabet=st.characters(codec="utf-8", categories=["L", "N", "Zs", "Pd"]), max_size=24)
hostile_ids = st.one_of(
    st.builds(lambda i, c, k: i[:k] + c + i[k:], valid_ids, st.sampled_from(HOSTILE), st.integers(0, 30)),
    st.sampled_from([EXISTING.lower(), EXISTING.swapcase(), "", "a", "a/b/c", "a/b.json", "a/b.git", "a--b/c"]),
    texts,
    st.integers(),
    st.none(),
)
hostile_families = st.one_of(texts, st.sampled_from(["", " Acme", 'A"b', "a\\b", "x" * 61]), st.none(), st.integers())


class _Huge(int):
    """An integer of 5001 digits that hypothesis can print (int's repr refuses past 4300 digits)."""

    def __repr__(self) -> str:
        return "10**5000"


HUGE = _Huge(10**5000)  # json.dumps refuses it as int's repr does: the tool must say so, not crash
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([10**40, -1, 0, 2**63, HUGE])
    | st.floats(allow_nan=True, allow_infinity=True)
    | plain_texts
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
odd_values = st.sampled_from([b"bytes", {1, 2}, (1, 2), object(), 1j])
CONFIG_KEYS = sorted(CONFIG) + ["text_config", "head_dim", "sliding_window", "layer_types", "rope_scaling"]


@st.composite
def configs(draw: st.DrawFn) -> Any:
    """hub_standin.CONFIG with keys dropped, replaced by any JSON value (or a non-JSON one), or added."""
    if draw(st.integers(0, 20)) == 0:
        return draw(json_values | odd_values)  # not an object at all
    config: dict[Any, Any] = dict(CONFIG)
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(["drop", "set", "add", "odd"]))
        key = draw(st.sampled_from(CONFIG_KEYS))
        if action == "drop":
            config.pop(key, None)
        elif action == "set":
            config[key] = draw(json_values)
        elif action == "add":
            config[draw(plain_texts | texts)] = draw(json_values)
        else:
            config[key] = draw(odd_values)
    return config


@st.composite
def entries(draw: st.DrawFn) -> tuple[Any, Any, Any]:
    """(hub id, family, config): a valid id and family 6 times in 10 each (one_of would favour the short
    hostile branches), so that the accepted side, the round-trip through every lookup, is exercised as much."""
    pick = draw(st.integers(0, 9))
    hub_id = draw(valid_ids) if pick < 6 else EXISTING if pick == 6 else draw(hostile_ids)
    family = draw(st.sampled_from(["Llama 3.1", "Acme", "Qwen 3"]) | plain_texts.filter(lambda t: t.strip() == t != ""))
    return hub_id, family if draw(st.integers(0, 9)) < 6 else draw(hostile_families), draw(configs())


@contextmanager
def registry_in(folder: Path, text: str) -> Iterator[None]:
    """kvsize.registry reading `text` as its registry.jsonl (the module finds it beside itself), run from that
    folder so that no generated org/name can name a real path (a path is resolved before the registry)."""
    (folder / "registry.jsonl").write_text(text, encoding="utf-8")
    original, cwd = registry._models_dir, os.getcwd()
    os.chdir(folder)
    registry._models_dir = lambda: folder
    for cached in (registry._lines, registry.registry_entries, registry.registry_weights):
        cached.cache_clear()
    try:
        yield
    finally:
        os.chdir(cwd)
        registry._models_dir = original
        for cached in (registry._lines, registry.registry_entries, registry.registry_weights):
            cached.cache_clear()


BASE_LINES = [line for line in (MODELS / "registry.jsonl").read_text(encoding="utf-8").split("\n") if line]
BASE = "\n".join(BASE_LINES[:3] + [line for line in BASE_LINES if f'"{EXISTING}"' in line]) + "\n"
BASE_SOURCES = SOURCES_HEADER + "\n"


def check_entry(hub_id: Any, family: Any, config: Any) -> str:
    """'refused' (a KvsizeError) or 'accepted'; an accepted entry must then be read back by every lookup."""
    from kvsize.resolve import load_model_config

    try:
        registry_text, _ = plan_add(hub_id, family, config, SOURCE, BASE, BASE_SOURCES)
    except KvsizeError as exc:
        assert "\n" not in str(exc)
        return "refused"
    assert isinstance(hub_id, str) and isinstance(config, dict)
    with tempfile.TemporaryDirectory() as folder, registry_in(Path(folder), registry_text):
        entries = registry.registry_entries()
        assert len(entries) == len(BASE_LINES[:3]) + 1 + (hub_id.lower() != EXISTING.lower())
        for probe in (hub_id, hub_id.upper(), f"  {hub_id.lower()} "):
            loaded = load_model_config(probe)
            assert loaded.source == "registry" and loaded.hub_id == hub_id
        assert json.dumps(loaded.raw) == json.dumps(config)  # as written (NaN stays NaN, a tuple a list)
        assert parse_config(loaded.raw, source=loaded.location).layers
        estimate_parameters(loaded.raw)
        for entry in registry.select_entries(search=hub_id.split("/")[1]):  # `kvsize models --search`
            parse_config(registry.load_registry_config(entry), source=entry.hub_id)
        assert not any(_UNSAFE.search(s) for s in (hub_id, registry.find_entry(hub_id).family))  # type: ignore[union-attr]
    return "accepted"


FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@settings(FUZZ, max_examples=150)
@given(entries())
def test_registry_entries_are_refused_or_read_back(entry: tuple[Any, Any, Any]) -> None:
    event(check_entry(*entry))


@pytest.mark.slow
@settings(FUZZ, max_examples=5000)
@given(entries())
def test_registry_entries_are_refused_or_read_back_at_length(entry: tuple[Any, Any, Any]) -> None:
    event(check_entry(*entry))


def test_the_property_sees_both_outcomes() -> None:
    """The generators reach both sides: a plain entry is accepted, hostile ones refused."""
    assert check_entry("acme/tiny-1", "Acme", dict(CONFIG)) == "accepted"
    assert check_entry(EXISTING, "Qwen 3", dict(CONFIG)) == "accepted"  # the same spelling replaces
    assert check_entry(EXISTING.lower(), "Qwen 3", dict(CONFIG)) == "refused"
    assert check_entry("acme/tiny-1", "Acme", {**CONFIG, "x": 10**5000}) == "refused"
    assert check_entry("acme/tiny-1", "Acme", {**CONFIG, "x": {1, 2}}) == "refused"
    assert check_entry("acme/tiny-1", "Acme", {**CONFIG, "x": math.inf}) == "accepted"  # as Mamba2 configs hold


def _argv_safe(text: Any) -> bool:
    return isinstance(text, str) and "\x00" not in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _subprocess_sample(hub_id: Any, family: Any, config: Any) -> str:
    if not (_argv_safe(hub_id) and _argv_safe(family)):
        return "not an argv"
    with tempfile.TemporaryDirectory() as folder:
        models = models_copy(Path(folder) / "models")
        before = snapshot(models)
        try:
            text = json.dumps(config, ensure_ascii=False)
        except (TypeError, ValueError):
            text = '{"model_type": "llama", "x": ' + "9" * 5000 + "}"  # what json cannot write, as a file could hold
        config_file = Path(folder) / "config.json"
        config_file.write_text(text, encoding="utf-8", errors="surrogatepass")
        proc = add_tool(models, hub_id, config_file, "--family", family)
        assert "Traceback" not in proc.stderr
        if proc.returncode == 2:
            one_error(proc)
            assert snapshot(models) == before
            return "refused (exit 2)"
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
        lines = registry.split_lines((models / "registry.jsonl").read_text(encoding="utf-8"))
        entry = registry.read_entries(lines)[hub_id.lower()]
        _, stored = registry.validate_entry(lines[entry.line - 1], entry.line)
        parse_config(stored, source=entry.file_name)
    return "accepted (exit 0)"


@settings(FUZZ, max_examples=6)
@given(entries())
def test_the_add_tool_process_on_generated_entries(entry: tuple[Any, Any, Any]) -> None:
    """A sample of the same entries through `python -m kvsize.models.add`: exit 2 with one Error line and
    the files unchanged, or exit 0 and an entry the reader takes."""
    event(_subprocess_sample(*entry))


@pytest.mark.slow
@settings(FUZZ, max_examples=60)
@given(entries())
def test_the_add_tool_process_on_generated_entries_at_length(entry: tuple[Any, Any, Any]) -> None:
    event(_subprocess_sample(*entry))
