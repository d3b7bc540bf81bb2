"""A key given twice in any YAML file the product reads is refused with file, line and key
path (plain YAML keeps the last one silently): the table config (every repetition at once,
with the other errors; ``run`` exits 78 and ``check-config`` 1), a variant file and a camera
settings file, all through the one loader, ``common.yamlfile``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from common.yamlfile import DuplicateKeyError, format_key_path, load_yaml, parse_yaml
from daemon.rules.variants import VariantError, load_variant
from daemon.service.config import load_config
from daemon.service.configfile import ConfigError
from drivers.camera.settings import CameraSettingsError, load_camera_settings

TABLE = """\
table_id: T7
table:
  decks: 8
readers:
  - driver: angel_eye
    settings: {url: /dev/null, url: /dev/ttyUSB0}
broker:
  tls: {enabled: false}
table:
  decks: 6
"""


def test_the_loader_lists_every_repeated_key_with_line_and_path() -> None:
    with pytest.raises(DuplicateKeyError) as info:
        parse_yaml(TABLE, "table.yaml")
    assert [(format_key_path(d.path), d.first_line, d.line) for d in info.value.duplicates] == [
        ("readers[0].settings.url", 6, 6),
        ("table", 2, 9),
    ]
    assert str(info.value).splitlines()[1] == (
        "table.yaml:9: table: key 'table' is given twice, on line 2 and again on line 9 "
        "(YAML would silently keep the last): remove one"
    )


def test_equal_looking_keys_of_different_types_and_aliases_are_not_repeats() -> None:
    data = parse_yaml('1: int\n"1": str\nbase: &b {x: 1}\ncopy: *b\nloop: &l [*l]\n', "f.yaml").data
    assert data["1"] == "str"
    assert data[1] == "int"
    assert data["copy"] == {"x": 1}
    assert data["loop"][0] is data["loop"]


def test_the_table_config_refuses_repeats_with_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(TABLE)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert [(format_key_path(p.path), p.line) for p in info.value.problems] == [
        ("readers[0].settings.url", 6),
        ("table", 9),
    ]
    assert str(info.value.problems[1]).startswith(f"{path}:9: table: key 'table' is given twice")


def test_run_exits_78_and_check_config_1_on_a_repeated_key(tmp_path: Path) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\n" + TABLE)
    ran = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "run", "--config", str(path)], capture_output=True, text=True
    )
    assert ran.returncode == 78, ran.stderr
    assert f"{path}:10: table: key 'table' is given twice, on line 3" in ran.stderr
    assert not (tmp_path / "state").exists()
    checked = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "check-config", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 1
    assert "2 configuration errors" in checked.stderr


def test_a_variant_file_refuses_a_repeated_key(tmp_path: Path) -> None:
    path = tmp_path / "house.yaml"
    path.write_text(
        "name: house\nbets:\n  - name: Banker\n    kind: banker\n    payout: 0.95\n    payout: 1\n"
    )
    with pytest.raises(VariantError) as info:
        load_variant(path)
    assert str(info.value).startswith(f"{path}:6: bets[0].payout: key 'payout' is given twice")


def test_a_camera_settings_file_refuses_a_repeated_key(tmp_path: Path) -> None:
    path = tmp_path / "camera.yaml"
    path.write_text("source: /dev/video0\nfps: 5\nfps: 10\n")
    with pytest.raises(CameraSettingsError) as info:
        load_camera_settings(path)
    assert str(info.value).startswith(f"{path}:3: fps: key 'fps' is given twice, on line 2")


def test_load_yaml_reads_a_file_and_an_empty_file_is_none(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("a: {b: [1, 2]}\n")
    assert load_yaml(path) == {"a": {"b": [1, 2]}}
    path.write_text("")
    assert load_yaml(path) is None
