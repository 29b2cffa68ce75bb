"""The chip catalogue: entries load, device strings map to the right chip, trace figures win."""

from __future__ import annotations

import pytest

from profan.chips import (
    catalogue,
    chip_for_device,
    get_chip,
    match_device_string,
    read_chip_file,
    using_chip_file,
)
from profan.errors import ConfigError
from profan.trace.profile import DeviceInfo

REQUIRED = ["tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"]
REQUIRED += ["a100", "h100", "h200", "b200", "mi300x", "mi355x", "cpu"]


def test_catalogue_has_every_required_chip_with_cited_figures() -> None:
    chips = catalogue()
    for name in REQUIRED:
        chip = chips[name]
        assert chip.peak_flops["bf16"] > 0
        assert chip.hbm_bytes_per_s > 0 and chip.hbm_bytes > 0
        # bidirectional is twice one direction, on every chip
        assert chip.ici_link_bytes_per_s_bi == pytest.approx(2 * chip.ici_link_bytes_per_s_uni)
        assert chip.sources, f"{name} cites no source"
    assert chips["cpu"].approximate


def test_model_md_table_figures() -> None:
    # MODEL.md section 5 is the project's reference
    v5e = get_chip("tpu-v5e")
    assert (v5e.peak_flops["bf16"], v5e.peak_flops["int8"]) == (1.97e14, 3.94e14)
    assert (v5e.hbm_bytes_per_s, v5e.ici_link_bytes_per_s_uni) == (8.1e11, 4.5e10)
    assert get_chip("tpu-v5p").hbm_bytes_per_s == 2.8e12
    assert get_chip("tpu-v6e").peak_flops["bf16"] == 9.2e14
    assert get_chip("h100").peak_flops["bf16"] == 9.89e14


@pytest.mark.parametrize(
    ("device_string", "expected"),
    [
        ("TPU v6 Lite", "tpu-v6e"),
        ("TPU v5 lite", "tpu-v5e"),  # must not fall to v5p's "TPU v5"
        ("TPU v5", "tpu-v5p"),
        ("TPU v4", "tpu-v4"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
    ],
)
def test_device_strings_map_to_entries(device_string: str, expected: str) -> None:
    chip = match_device_string(device_string)
    assert chip is not None and chip.name == expected


def test_trace_peaks_win_and_say_so() -> None:
    device = DeviceInfo(
        kind="TPU",
        type_string="TPU v6 Lite",
        count=4,
        peak_flops_per_s=918e12,
        peak_hbm_bytes_per_s=1637.993152512e9,
    )
    chip = chip_for_device(device)
    assert chip.name == "tpu-v6e"
    assert chip.device_peak_flops("bf16") == 918e12
    assert chip.device_hbm_bytes_per_s == pytest.approx(1.638e12, rel=1e-3)
    assert chip.figure_sources["peak_flops.bf16"] == "trace"
    assert chip.figure_sources["peak_flops.int8"] == "catalogue"
    assert chip.figure_sources["hbm_bytes_per_s"] == "trace"


def test_gpu_found_by_compute_capability_and_cpu_fallback() -> None:
    gpu = DeviceInfo(
        kind="GPU",
        type_string=None,
        count=1,
        stats={"compute_cap_major": 9, "compute_cap_minor": 0},
    )
    assert chip_for_device(gpu).name in ("h100", "h200")
    cpu = DeviceInfo(kind="CPU", type_string="weird host", count=8)
    assert chip_for_device(cpu).name == "cpu"
    with pytest.raises(ConfigError, match="--chip"):
        chip_for_device(DeviceInfo(kind="TPU", type_string="TPU v99", count=1))


def test_two_cores_per_chip_halve_device_figures() -> None:
    v3 = get_chip("tpu-v3")
    assert v3.device_peak_flops("bf16") == pytest.approx(0.7e14)


def test_user_chip_file_adds_chips(tmp_path) -> None:
    extra = tmp_path / "synthetic_chips.toml"
    extra.write_text(
        """
[chips.my-accel]
display_name = "My Accel"
kind = "GPU"
device_strings = ["MyCo Accel 1"]
peak_flops = { bf16 = 1e15 }
hbm_bytes = 1e9
hbm_bytes_per_s = 1e12
ici_link_bytes_per_s_uni = 1e10
ici_link_bytes_per_s_bi = 2e10
ici_links = 2
topology = "switched"
ici_hop_latency_s = 1e-6
dcn_bytes_per_s = 1e9
pcie_bytes_per_s = 1e9
"""
    )
    with using_chip_file(extra):
        assert get_chip("my-accel").display_name == "My Accel"
        assert match_device_string("MyCo Accel 1", catalogue()).name == "my-accel"
        assert "tpu-v5e" in catalogue()  # the built-in ones stay
    assert "my-accel" not in catalogue()  # in force within the block only


_GOOD = """
[chips.x]
peak_flops = { bf16 = 1e12 }
hbm_bytes = 1e9
hbm_bytes_per_s = 1e12
ici_link_bytes_per_s_uni = 1e10
ici_link_bytes_per_s_bi = 2e10
ici_links = 2
topology = "switched"
ici_hop_latency_s = 1e-6
dcn_bytes_per_s = 1e9
pcie_bytes_per_s = 1e9
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not toml = = 1", "not valid TOML"),
        ("[other]\nx = 1", "no \\[chips.NAME\\]"),
        (_GOOD + "[other]\nx = 1", "unknown top-level table 'other' \\(allowed: chips\\)"),
        ("[chips.x]\npeak_flops = { bf16 = 1e12 }", "chips.x: lacks the field 'hbm_bytes'"),
        (
            "[chips.x]\npeak_flops = { f16 = 1e12 }",
            "chips.x.peak_flops: unknown field 'f16' "
            "\\(allowed: bf16, fp8, int8, tf32, f32, f64\\)",
        ),
        (_GOOD.replace("bf16 = 1e12", "bf16 = 0"), "chips.x.peak_flops.bf16: must be a number > 0"),
        (
            _GOOD.replace("hbm_bytes = 1e9", 'hbm_bytes = "lots"'),
            "chips.x.hbm_bytes: must be a number, got a string",
        ),
        (
            _GOOD.replace('"switched"', '"mesh"'),
            "chips.x.topology: 'mesh' is not allowed \\(allowed: torus2d, torus3d, switched",
        ),
        (_GOOD + "colour = 1\n", "chips.x: unknown field 'colour' \\(allowed: peak_flops, "),
        (_GOOD + "ici_links_total = 3\n", "unknown field 'ici_links_total'"),
        (_GOOD + "device_strings = ['a', 3]\n", "chips.x.device_strings\\[1\\]: must be a string"),
        (_GOOD + "megacore = true\n", "chips.x.megacore: a megacore chip has"),
        (_GOOD + "devices_per_chip = 0\n", "chips.x.devices_per_chip: must be a whole number >= 1"),
    ],
)
def test_bad_chip_files_raise_config_errors(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "synthetic_bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as raised:
        read_chip_file(path)
    assert str(raised.value).startswith(str(path))  # every message names the file


def test_the_minimal_entry_loads_with_defaults(tmp_path) -> None:
    path = tmp_path / "synthetic_chip.toml"
    path.write_text(_GOOD)
    chip = read_chip_file(path)["x"]
    assert (chip.kind, chip.devices_per_chip, chip.tensorcores_per_chip, chip.megacore) == (
        "TPU", 1, 1, False)  # fmt: skip
    assert chip.peak_flops == {"bf16": 1e12} and chip.display_name == "x"


def test_report_figures_device_capacity_and_figures_source() -> None:
    v3 = get_chip("tpu-v3")
    assert v3.device_hbm_capacity_bytes == pytest.approx(16e9)
    assert v3.figures_source == "catalogue"
    device = DeviceInfo(kind="TPU", type_string="TPU v6 Lite", count=4, peak_flops_per_s=918e12)
    assert chip_for_device(device).figures_source == "trace"


def test_unknown_chip_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match="tpu-v5e"):
        get_chip("tpu-v42")


def test_gpu_vendor_capability_and_memory_pick_the_chip() -> None:
    amd = DeviceInfo(kind="GPU", type_string=None, count=8,
                     stats={"device_vendor": "AMD", "compute_cap_major": 9,
                            "compute_cap_minor": 4, "memory_size": 206141652992})  # fmt: skip
    assert chip_for_device(amd).name == "mi300x"
    h200 = DeviceInfo(kind="GPU", type_string=None, count=1,
                      stats={"device_vendor": "NVIDIA", "compute_cap_major": 9,
                             "compute_cap_minor": 0, "memory_size": 150_000_000_000})  # fmt: skip
    assert chip_for_device(h200).name == "h200"
    assert chip_for_device(h200).figure_sources["chip"] == (
        "nvidia compute capability 9.0, 150 GB of memory: nearest h200's 141 GB"
    )


def test_trace_figures_far_below_the_published_peak_are_not_used() -> None:
    # the MI300X traces report memory_bandwidth 2.6624e12 (half of the 5.3e12 peak)
    device = DeviceInfo(kind="GPU", type_string=None, count=8, peak_hbm_bytes_per_s=2.6624e12,
                        stats={"device_vendor": "AMD", "compute_cap_major": 9,
                               "compute_cap_minor": 4})  # fmt: skip
    chip = chip_for_device(device)
    assert chip.hbm_bytes_per_s == 5.3e12
    assert chip.figure_sources["hbm_bytes_per_s"].startswith("catalogue (trace reported")


def test_override_to_another_chip_ignores_the_traces_figures() -> None:
    device = DeviceInfo(kind="TPU", type_string="TPU v6 Lite", count=4,
                        peak_flops_per_s=918e12, peak_hbm_bytes_per_s=1.638e12)  # fmt: skip
    chip = chip_for_device(device, override="h100")
    assert chip.name == "h100" and chip.hbm_bytes_per_s == 3.35e12
    assert chip.figure_sources["hbm_bytes_per_s"] == "catalogue"
    what_if = chip_for_device(device, override="tpu-v5e")
    assert what_if.hbm_bytes_per_s == 8.1e11 and "tpu-v6e" in what_if.figure_sources["note"]
    same = chip_for_device(device, override="tpu-v6e")
    assert same.figure_sources["hbm_bytes_per_s"] == "trace"
    unknown = DeviceInfo(kind="TPU", type_string="TPU v99", count=1, peak_hbm_bytes_per_s=2e12)
    assert chip_for_device(unknown, override="tpu-v6e").hbm_bytes_per_s == 2e12
