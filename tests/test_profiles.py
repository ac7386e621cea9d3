"""GPU profiles: the shipped YAML files, the loader's error messages, and name resolution.

Expected numbers are typed in by hand from the reference table the profiles were generated from (gpus.yaml),
never read back from kvsize.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from kvsize.errors import ConfigError, KvsizeError, UnknownGpuProfile
from kvsize.profiles import (
    GpuProfile,
    custom_gpu,
    load_profiles,
    parse_profile,
    profiles_dir,
    resolve_gpu,
)

GIB = 2**30
REPO_PROFILES = Path(__file__).resolve().parent.parent / "gpu_profiles"


@pytest.fixture(scope="module")
def profiles() -> dict[str, GpuProfile]:
    return load_profiles()


def minimal_profile(profile_id: str = "test-gpu", **changes: Any) -> dict[str, Any]:
    """A valid profile as the YAML loader would return it."""
    data: dict[str, Any] = {
        "id": profile_id,
        "name": "Test GPU 24GB",
        "vendor": "NVIDIA",
        "aliases": [],
        "driver_name": None,
        "arch": None,
        "memory_bytes": 24 * GIB,
        "memory_bytes_is_advertised": False,
        "memory_reported_by": "nvidia-smi memory.total",
        "memory_advertised": "24 GB",
        "memory_advertised_bytes": 24 * GIB,
        "memory_type": "GDDR6",
        "memory_notes": None,
        "memory_bandwidth_bytes_per_s": 1_000_000_000_000,
        "dense_tflops": {"bf16": 100, "fp8": None, "fp4": None},
        "fp8_native": False,
        "fp8_formats": [],
        "fp4_native": False,
        "fp4_formats": [],
        "interconnect": {"scale_up": "none", "scale_up_gb_s_bidirectional": None, "pcie": "PCIe Gen4 x16"},
        "tdp_w": 300,
        "typical_per_node": "1-8",
        "price_usd_per_hour": [],
        "uncertain_fields": [],
        "notes": None,
        "sources": ["test fixture"],
    }
    data.update(changes)
    return data


def write_profile(directory: Path, stem: str, data: object) -> Path:
    path = directory / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- the shipped profiles ---


def test_profiles_dir_is_the_checkout_folder() -> None:
    assert profiles_dir().resolve() == REPO_PROFILES
    assert len(list(REPO_PROFILES.glob("*.yaml"))) == 54


def test_exactly_54_profiles(profiles: dict[str, GpuProfile]) -> None:
    assert len(profiles) == 54
    assert "h100-sxm" in profiles and "dgx-spark" in profiles


@pytest.mark.parametrize("path", sorted(REPO_PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_file_validates_and_id_is_file_stem(path: Path) -> None:
    profile = parse_profile(yaml.safe_load(path.read_text()), source=str(path))
    assert profile.id == path.stem
    # all keys present in every file, even where the value is null
    raw = yaml.safe_load(path.read_text())
    assert set(raw) == {f.name for f in msgspec.structs.fields(GpuProfile)}


def test_ids_and_aliases_unique_and_lower_case(profiles: dict[str, GpuProfile]) -> None:
    names = [p.id for p in profiles.values()] + [a for p in profiles.values() for a in p.aliases]
    assert len(names) == len(set(names))
    assert all(n == n.lower() and " " not in n and "_" not in n for n in names)


def test_every_field_is_documented() -> None:
    """Each field of the profile records is followed by its docstring (what `kvsize gpus --json` readers see
    explained in kvsize/profiles.py)."""
    import ast
    import inspect

    import kvsize.profiles as module

    for record in (GpuProfile, module.Interconnect, module.Price):
        body = ast.parse(inspect.getsource(record)).body[0].body  # type: ignore[attr-defined]
        documented = {
            node.target.id
            for node, after in zip(body, body[1:], strict=False)
            if isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
        }
        assert {f.name for f in msgspec.structs.fields(record)} <= documented, record.__name__


def test_h100_sxm_values(profiles: dict[str, GpuProfile]) -> None:
    p = profiles["h100-sxm"]
    assert p.name == "H100 SXM5 80GB"
    assert p.vendor == "NVIDIA"
    assert p.driver_name == "NVIDIA H100 80GB HBM3"
    assert p.memory_bytes == 85520809984  # 81559 MiB, nvidia-smi
    assert p.memory_bytes_is_advertised is False
    assert p.memory_reported_by == "nvidia-smi memory.total"
    assert p.memory_advertised == "80 GB"
    assert p.memory_advertised_bytes == 85899345920  # 80 GiB
    assert p.memory_bandwidth_bytes_per_s == 3_350_000_000_000
    assert isinstance(p.memory_bandwidth_bytes_per_s, int)
    assert p.dense_tflops == {"bf16": 989, "fp8": 1979, "fp4": None}
    assert p.fp8_native is True and p.fp8_formats == ("e4m3", "e5m2")
    assert p.fp4_native is False and p.fp4_formats == ()
    assert p.interconnect is not None and p.interconnect.scale_up_gb_s_bidirectional == 900
    assert p.tdp_w == 700
    assert p.typical_per_node == "8 (HGX/DGX)"
    assert [(x.offer, x.usd_per_hour, x.as_of) for x in p.price_usd_per_hour] == [
        ("Lambda 8x H100 SXM", 3.99, "2026-09-20"),
        ("Lambda 1x H100 SXM", 4.29, "2026-09-20"),
        ("Modal H100", 3.95, "2026-09-26"),
    ]
    assert p.uncertain_fields == ()
    assert "h100" in p.aliases


@pytest.mark.parametrize(
    ("profile_id", "memory_bytes", "bandwidth"),
    [
        ("a100-40gb", 42949672960, 1_555_000_000_000),
        ("a100-80gb", 85899345920, 2_039_000_000_000),
        ("h200", 150754820096, 4_800_000_000_000),
        ("b200", 192265846784, 8_000_000_000_000),
        ("b300", 288400343040, 8_000_000_000_000),
        ("gb200", 198674743296, 8_000_000_000_000),
        ("l40s", 48305799168, 864_000_000_000),
        ("a10", 24146608128, 600_000_000_000),
        ("t4", 16106127360, 320_000_000_000),
        ("rtx-4090", 25757220864, 1_008_000_000_000),
        ("rtx-pro-6000-blackwell", 102641958912, 1_792_000_000_000),
        ("mi300x", 206141652992, 5_300_000_000_000),
        ("mi355x", 309220868096, 8_000_000_000_000),
        ("gaudi3", 137438953472, 3_700_000_000_000),
        ("tpu-v6e", 33550237696, 1_638_000_000_000),
        ("apple-m2-ultra", 154618822656, 800_000_000_000),
        ("dgx-spark", 128538451968, 273_000_000_000),
        ("jetson-agx-orin-64gb", 68719476736, 204_800_000_000),  # 204.8 GB/s, advertised 64 GiB
    ],
)
def test_memory_and_bandwidth(
    profiles: dict[str, GpuProfile], profile_id: str, memory_bytes: int, bandwidth: int
) -> None:
    p = profiles[profile_id]
    assert p.memory_bytes == memory_bytes
    assert p.memory_bandwidth_bytes_per_s == bandwidth


def test_b300_advertised_gb_is_decimal(profiles: dict[str, GpuProfile]) -> None:
    p = profiles["b300"]
    assert p.memory_advertised == "288 GB"
    assert p.memory_advertised_bytes == 288_000_000_000
    assert p.dense_tflops["fp4"] == 14000


def test_advertised_only_profiles(profiles: dict[str, GpuProfile]) -> None:
    advertised = {pid for pid, p in profiles.items() if p.memory_bytes_is_advertised}
    assert advertised == {
        "mi325x",
        "tpu-v5e",
        "tpu-v5p",
        "apple-m3-max",
        "apple-m4-max",
        "jetson-agx-orin-64gb",
    }
    assert profiles["mi325x"].memory_bytes == 274877906944  # 256 GiB; rocm-smi total not found
    assert profiles["tpu-v5e"].memory_bytes == 17179869184  # 16 GiB nominal
    assert "memory_bytes" in profiles["mi325x"].uncertain_fields


def test_numbers_keep_their_yaml_type(profiles: dict[str, GpuProfile]) -> None:
    assert profiles["l40s"].dense_tflops["bf16"] == 362.05
    assert profiles["mi300x"].dense_tflops == {"bf16": 1307.4, "fp8": 2614.9, "fp4": None}
    assert profiles["t4"].dense_tflops == {"bf16": None, "fp16": 65, "fp8": None, "fp4": None}
    assert profiles["tpu-v6e"].dense_tflops["int8_tops"] == 1836
    assert type(profiles["h100-sxm"].dense_tflops["bf16"]) is int
    assert profiles["rtx-3090"].interconnect is not None
    assert profiles["rtx-3090"].interconnect.scale_up_gb_s_bidirectional == 112.5
    assert profiles["a100-40gb"].tdp_w == "400 (SXM4) / 250 (PCIe)"
    assert profiles["tpu-v5e"].tdp_w is None


def test_fp8_formats(profiles: dict[str, GpuProfile]) -> None:
    assert profiles["mi300x"].fp8_formats == ("e4m3fnuz", "e5m2fnuz")
    assert profiles["b200"].fp4_formats == ("nvfp4", "mxfp4")
    assert profiles["a100-80gb"].fp8_native is False


def test_non_hourly_price_has_null_rate(profiles: dict[str, GpuProfile]) -> None:
    (price,) = profiles["dgx-spark"].price_usd_per_hour
    assert price.usd_per_hour is None
    assert "not hourly" in price.offer


def test_profiles_are_frozen_and_hashable(profiles: dict[str, GpuProfile]) -> None:
    p = profiles["h100-sxm"]
    with pytest.raises(AttributeError):
        p.memory_bytes = 1  # type: ignore[misc]
    assert {p: 1}[p] == 1


def test_default_load_is_cached_but_returns_a_copy() -> None:
    first = load_profiles()
    first.pop("h100-sxm")
    second = load_profiles()
    assert "h100-sxm" in second
    assert second["h200"] is load_profiles()["h200"]


# --- resolve_gpu ---


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("h100", "h100-sxm"),
        ("H100", "h100-sxm"),
        ("h100-sxm", "h100-sxm"),
        ("H100-SXM", "h100-sxm"),
        ("h100 sxm", "h100-sxm"),
        ("h100_sxm", "h100-sxm"),
        ("  h200 ", "h200"),
        ("mi300", "mi300x"),
        ("MI300X", "mi300x"),
        ("4090", "rtx-4090"),
        ("RTX 4090", "rtx-4090"),
        ("gaudi-2", "gaudi2"),
        ("Gaudi_2", "gaudi2"),
        ("a100-sxm4-80gb", "a100-80gb"),
        ("rtx-pro-6000", "rtx-pro-6000-blackwell"),
        ("gb10", "dgx-spark"),
    ],
)
def test_resolve(name: str, expected: str) -> None:
    assert resolve_gpu(name).id == expected


def test_resolve_uses_given_profiles() -> None:
    custom = parse_profile(minimal_profile("my-card", aliases=["mine"]), source="test")
    assert resolve_gpu("MINE", {"my-card": custom}) is custom
    with pytest.raises(UnknownGpuProfile):
        resolve_gpu("h100", {"my-card": custom})


@pytest.mark.parametrize("name", ["h10", "h100-sxm5"])
def test_unknown_name_suggests_close_names(name: str) -> None:
    with pytest.raises(UnknownGpuProfile) as info:
        resolve_gpu(name)
    assert str(info.value) == f"unknown GPU profile '{name}'"
    assert info.value.hint is not None
    assert info.value.hint.startswith("Did you mean: ")
    assert "h100-sxm" in info.value.hint
    assert "'kvsize gpus' lists all" in info.value.hint
    assert "--gpu-mem" in info.value.hint


@pytest.mark.parametrize(("name", "expected"), [("a100", ["a100-40gb", "a100-80gb"]), ("v100", ["v100-16gb"])])
def test_ambiguous_names_are_not_aliases(name: str, expected: list[str]) -> None:
    with pytest.raises(UnknownGpuProfile) as info:
        resolve_gpu(name)
    for pid in expected:  # the cards the name could be are named in the message itself
        assert pid in str(info.value)


def test_unknown_name_without_suggestions() -> None:
    with pytest.raises(UnknownGpuProfile) as info:
        resolve_gpu("zzzzzz")
    assert info.value.hint is not None
    assert "Did you mean" not in info.value.hint
    assert "kvsize gpus" in info.value.hint


# --- malformed profiles ---


def assert_config_error(directory: Path, *fragments: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_profiles(directory)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def test_valid_tmp_profile_loads(tmp_path: Path) -> None:
    write_profile(tmp_path, "test-gpu", minimal_profile())
    assert load_profiles(tmp_path)["test-gpu"].memory_bytes == 24 * GIB


def test_missing_field(tmp_path: Path) -> None:
    data = minimal_profile()
    del data["memory_bytes"]
    path = write_profile(tmp_path, "test-gpu", data)
    assert_config_error(tmp_path, str(path), "memory_bytes", "required")


def test_extra_key(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "test-gpu", minimal_profile(memory_gb=24))
    assert_config_error(tmp_path, str(path), "memory_gb")


def test_negative_memory(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "test-gpu", minimal_profile(memory_bytes=-5))
    assert_config_error(tmp_path, str(path), "memory_bytes", "-5")


def test_memory_as_text_is_rejected(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "test-gpu", minimal_profile(memory_bytes="80 GB"))
    assert_config_error(tmp_path, str(path), "memory_bytes", "'80 GB'")


def test_nested_field_error_names_the_path(tmp_path: Path) -> None:
    price = {"offer": "x", "usd_per_hour": -1, "as_of": "2026-01-01", "source": "y"}
    path = write_profile(tmp_path, "test-gpu", minimal_profile(price_usd_per_hour=[price]))
    assert_config_error(tmp_path, str(path), "price_usd_per_hour[0].usd_per_hour")


def test_id_must_equal_file_name(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "other-name", minimal_profile("test-gpu"))
    assert_config_error(tmp_path, str(path), "'test-gpu'", "'other-name'")


def test_bad_id_pattern(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "Test_GPU", minimal_profile("Test_GPU"))
    assert_config_error(tmp_path, str(path), "field 'id'")


def test_python_object_tag_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "test-gpu.yaml"
    path.write_text("id: !!python/object/apply:os.system ['echo pwned']\nname: x\n")
    assert_config_error(tmp_path, str(path), "python/object")


def test_invalid_yaml_syntax(tmp_path: Path) -> None:
    path = tmp_path / "test-gpu.yaml"
    path.write_text("id: test-gpu\nname: [unclosed\n")
    assert_config_error(tmp_path, str(path), "line")


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "test-gpu.yaml"
    path.write_text("- just\n- a list\n")
    assert_config_error(tmp_path, str(path), "mapping")


def test_alias_shared_by_two_profiles(tmp_path: Path) -> None:
    write_profile(tmp_path, "gpu-a", minimal_profile("gpu-a", aliases=["same"]))
    write_profile(tmp_path, "gpu-b", minimal_profile("gpu-b", aliases=["same"]))
    assert_config_error(tmp_path, "'same'", "gpu-a", "gpu-b")


def test_alias_equal_to_another_id(tmp_path: Path) -> None:
    write_profile(tmp_path, "gpu-a", minimal_profile("gpu-a"))
    write_profile(tmp_path, "gpu-b", minimal_profile("gpu-b", aliases=["gpu-a"]))
    assert_config_error(tmp_path, "'gpu-a'", "gpu-b")


def test_unknown_uncertain_field(tmp_path: Path) -> None:
    path = write_profile(tmp_path, "test-gpu", minimal_profile(uncertain_fields=["bw"]))
    assert_config_error(tmp_path, str(path), "'bw'")


def test_missing_or_empty_directory(tmp_path: Path) -> None:
    assert_config_error(tmp_path, str(tmp_path), "no *.yaml")
    assert_config_error(tmp_path / "nope", "does not exist")


def test_parse_profile_names_source() -> None:
    with pytest.raises(ConfigError) as info:
        parse_profile(minimal_profile(memory_bytes=0), source="somewhere.yaml")
    assert str(info.value).startswith("somewhere.yaml: ")
    assert "memory_bytes" in str(info.value)


# --- custom_gpu ---


def test_custom_gpu() -> None:
    p = custom_gpu(24 * GIB)
    assert p.id == "custom"
    assert p.name == "custom"
    assert p.memory_bytes == 25769803776
    assert p.memory_bandwidth_bytes_per_s is None
    assert p.dense_tflops == {}
    assert p.fp8_native is None
    assert p.price_usd_per_hour == ()
    assert p.sources == ("user-supplied --gpu-mem",)
    assert p.memory_reported_by == "user-supplied --gpu-mem"


def test_custom_gpu_name() -> None:
    p = custom_gpu(8 * GIB, name="My Card")
    assert p.name == "My Card"
    assert p.id == "my-card"


@pytest.mark.parametrize("bad", [0, -1])
def test_custom_gpu_rejects_non_positive(bad: int) -> None:
    with pytest.raises(KvsizeError, match=str(bad)):
        custom_gpu(bad)


# --- the index (gpu_profiles/index.json): a checked cache of the parsed YAML ---


def test_the_built_in_index_is_current() -> None:
    """`python -m kvsize.profiles` rebuilds it; a stale index costs start-up time (the YAML is read instead)."""
    from kvsize.profiles import INDEX_NAME, build_index

    assert (REPO_PROFILES / INDEX_NAME).read_text(encoding="utf-8") == build_index(REPO_PROFILES), (
        "gpu_profiles/index.json is stale: run python -m kvsize.profiles"
    )


def test_a_run_with_a_card_reads_the_index_not_the_yaml() -> None:
    code = (
        "import sys; from kvsize.profiles import resolve_gpu; "
        "assert resolve_gpu('h100').id == 'h100-sxm'; print('yaml' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_an_edited_file_is_read_from_its_yaml_not_the_stale_index(tmp_path: Path) -> None:
    from kvsize.profiles import INDEX_NAME, build_index

    write_profile(tmp_path, "test-gpu", minimal_profile(memory_bytes=1000))
    (tmp_path / INDEX_NAME).write_text(build_index(tmp_path), encoding="utf-8")
    assert load_profiles(tmp_path)["test-gpu"].memory_bytes == 1000
    write_profile(tmp_path, "test-gpu", minimal_profile(memory_bytes=2000))  # edited after the index was built
    assert load_profiles(tmp_path)["test-gpu"].memory_bytes == 2000
    write_profile(tmp_path, "other-gpu", minimal_profile("other-gpu", aliases=[]))  # a file added
    assert set(load_profiles(tmp_path)) == {"test-gpu", "other-gpu"}


def test_an_index_entry_is_validated_like_the_yaml(tmp_path: Path) -> None:
    """The index is data too: a tampered entry whose checksums still match is refused like a bad file."""
    import json

    from kvsize.profiles import INDEX_NAME, build_index

    write_profile(tmp_path, "test-gpu", minimal_profile())
    index = json.loads(build_index(tmp_path))
    index["profiles"]["test-gpu.yaml"]["memory_bytes"] = -1
    (tmp_path / INDEX_NAME).write_text(json.dumps(index), encoding="utf-8")
    assert_config_error(tmp_path, "memory_bytes")
