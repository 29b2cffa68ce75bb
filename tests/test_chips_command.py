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
