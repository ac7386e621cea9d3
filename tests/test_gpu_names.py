"""--gpu takes a profile id, an alias, or the name the driver reports (nvidia-smi, torch.cuda.get_device_name, a
vLLM log's device line), from each profile's `driver_name` (' / ' between two boards of one profile); a name two
cards share (a100: 40 or 80 GB) is refused naming both, never guessed (issue 20)."""

from __future__ import annotations

import pytest

from kvsize.errors import UnknownGpuProfile
from kvsize.profiles import load_profiles, resolve_gpu


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("nvidia  h100 80gb hbm3", "h100-sxm"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb"),  # the second board of a ' / ' list
        ("h100", "h100-sxm"),
    ],
)
def test_driver_names(name: str, profile: str) -> None:
    assert resolve_gpu(name).id == profile


def test_every_driver_name_resolves_to_its_own_profile() -> None:
    for profile in load_profiles().values():
        for reported in (profile.driver_name or "").split(" / "):
            if reported.strip():
                assert resolve_gpu(reported).id == profile.id, reported


@pytest.mark.parametrize(("name", "cards"), [("a100", "a100-40gb, a100-80gb"), ("v100", "v100-16gb, v100-32gb")])
def test_a_name_of_two_cards_is_refused_naming_both(name: str, cards: str) -> None:
    with pytest.raises(UnknownGpuProfile, match=f"is 2 cards: {cards}"):
        resolve_gpu(name)
