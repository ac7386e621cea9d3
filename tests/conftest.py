import sys
from pathlib import Path

import pytest

# expected_kv.py and other test data modules sit beside the tests.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test may reach the network, use a real HF cache or a token, or turn on tracebacks."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("KVSIZE_DEBUG", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def vllm_033(monkeypatch: pytest.MonkeyPatch) -> None:
    """Size "the newest vLLM" (no --engine-version) with 0.33.0's rules, for cases worked by hand for 0.33
    (16-token blocks, the profiled budget at 0.92) before 0.34 became the newest; tests/test_vllm_034.py works
    0.34's own."""
    from kvsize.engines.releases import ReleaseTable

    resolve = ReleaseTable.resolve

    def pinned(self: ReleaseTable, text: str | None):  # type: ignore[no-untyped-def]
        return resolve(self, "0.33.0" if text is None and self.engine == "vllm" else text)

    monkeypatch.setattr(ReleaseTable, "resolve", pinned)
