"""Model resolution order: local file or folder, registry, hub (with a fake fetcher), and hub errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsize.errors import ConfigError, EnvironmentProblem, ModelNotFound
from kvsize.hub import check_repo_id, fetch_config_from_hub
from kvsize.resolve import load_model_config

CONFIG = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256}


def test_local_file_and_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    by_file = load_model_config(str(tmp_path / "config.json"))
    by_folder = load_model_config(str(tmp_path))
    assert by_file.raw == by_folder.raw == CONFIG
    assert by_folder.source == "local" and by_folder.folder == tmp_path


def test_local_path_wins_over_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "meta-llama" / "Llama-3.1-8B"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    monkeypatch.chdir(tmp_path)
    assert load_model_config("meta-llama/Llama-3.1-8B").source == "local"


def test_registry_is_case_insensitive() -> None:
    loaded = load_model_config("META-LLAMA/llama-3.1-8b")
    assert loaded.source == "registry" and loaded.model == "meta-llama/Llama-3.1-8B"
    assert loaded.raw["num_key_value_heads"] == 8


def test_hub_is_asked_last_and_with_revision(tmp_path: Path) -> None:
    calls = []
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))

    def fake_fetch(repo_id: str, *, revision: str | None, token: str | None) -> Path:
        calls.append((repo_id, revision))
        return tmp_path / "config.json"

    loaded = load_model_config("someorg/new-model", fetch=fake_fetch)
    assert loaded.source == "hub" and loaded.raw == CONFIG
    # A revision bypasses the registry (which holds the main branch only).
    load_model_config("meta-llama/Llama-3.1-8B", revision="v1", fetch=fake_fetch)
    assert calls == [("someorg/new-model", None), ("meta-llama/Llama-3.1-8B", "v1")]


@pytest.mark.parametrize(
    "ref", ["./nope/config.json", "../../etc/passwd-not-here", "/no/such/config.json", "a/b/c", "x.json"]
)
def test_missing_paths(ref: str) -> None:
    with pytest.raises(ConfigError, match="no such file or folder"):
        load_model_config(ref)


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="folder has no config.json"):
        load_model_config(str(tmp_path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{bad", r"not valid JSON \(line 1"),
        ("[1, 2]", "got list"),
        ('"text"', "got str"),
        ("[" * 100_000, "nested too deeply|not valid JSON"),
    ],
)
def test_bad_json(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_model_config(str(path))


def test_huge_file_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(" " * (5 * 1024 * 1024) + "{}")
    with pytest.raises(ConfigError, match="too large"):
        load_model_config(str(path))


def test_binary_file_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_model_config(str(path))


@pytest.mark.parametrize("repo_id", ["bad id!", "org/na me", "a/../b", "-lead/x", "org/" + "x" * 200])
def test_invalid_repo_ids(repo_id: str) -> None:
    with pytest.raises(ModelNotFound, match="neither a local config.json nor a valid hub id"):
        check_repo_id(repo_id)


def test_offline_unknown_id_is_an_environment_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real huggingface_hub path, offline with an empty cache: exit code 3 and what to do."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(EnvironmentProblem, match="not in the local cache") as info:
        fetch_config_from_hub("someorg/not-cached")
    assert info.value.exit_code == 3 and "local config.json" in (info.value.hint or "")


def test_offline_cached_config_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config already in the HF cache works offline (the cache layout huggingface_hub reads)."""
    import huggingface_hub.constants as constants

    cache = tmp_path / "hub"
    snapshot = cache / "models--someorg--cached" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(CONFIG))
    (cache / "models--someorg--cached" / "refs").mkdir()
    (cache / "models--someorg--cached" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    path = fetch_config_from_hub("someorg/cached")
    assert json.loads(path.read_text()) == CONFIG
