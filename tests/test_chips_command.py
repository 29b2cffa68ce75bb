"""``profan chips``: lists the catalogue, as a table or JSON; bad names and files exit 2."""

from __future__ import annotations

import json

from profan.cli import main


def test_lists_every_chip(capsys) -> None:
    assert main(["chips"]) == 0
    out = capsys.readouterr().out
    for name in ("tpu-v5e", "tpu-v6e", "h100", "mi300x", "cpu ~"):
        assert name in out


def test_json_carries_figures_and_sources(capsys) -> None:
    assert main(["chips", "tpu-v6e", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["tpu-v6e"]
    assert data["tpu-v6e"]["peak_flops"]["bf16"] == 9.2e14
    assert data["tpu-v6e"]["sources"]


def test_unknown_chip_and_bad_file_exit_2(tmp_path, capsys) -> None:
    assert main(["chips", "tpu-v42"]) == 2
    assert "unknown chip" in capsys.readouterr().err
    bad = tmp_path / "synthetic_chips.toml"
    bad.write_text("[chips.x]\n")
    assert main(["chips", "--chips", str(bad)]) == 2
    assert "lacks the field" in capsys.readouterr().err


def test_transcendental_rates_are_listed_with_their_sources(capsys) -> None:
    assert main(["chips", "h100", "tpu-v6e", "cpu"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert "transc./s" in header
    rows = {line.split()[0]: line for line in out.splitlines()[1:4]}
    column = header.index("transc./s")
    assert rows["h100"][column:].split()[0] == "4.18"  # 4.18 T
    assert rows["tpu-v6e"][column:].split()[0] == "-"
    flat = " ".join(out.split())
    assert "h100: 4.18 T/s: NVIDIA CUDA C++ Programming Guide" in flat  # 4.18e12/s
    assert "tpu-v6e: -: unknown: no published EUP figure" in flat
    assert "cpu: 20 G/s: ESTIMATE" in flat  # 2e10/s
    assert main(["chips", "mi300x", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["mi300x"]
    assert (
        data["transcendentals_per_s"] == 1.021e13
        and "quarter" in data["sources"]["transcendentals"]
    )
