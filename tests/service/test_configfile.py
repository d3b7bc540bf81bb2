"""The generic YAML → pydantic loader: every error at once, each naming file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from daemon.service.configfile import (
    ConfigError,
    apply_env_overrides,
    format_key_path,
    read_yaml,
    validate,
)


class _Tls(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ca_file: Path | None = None


class _Broker(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: str
    port: int = Field(default=1883, ge=1, le=65535)
    password_file: Path | None = None
    tls: _Tls = _Tls()


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    speed: float


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table_id: str
    broker: _Broker
    items: list[_Item] = []


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "table.yaml"
    path.write_text(text)
    return path


def test_every_error_at_once_with_file_line_and_key_path(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "table_id: T1\n"
        "broker:\n"
        "  host: localhost\n"
        "  port: not-a-port\n"
        "  tls:\n"
        "    ca_fil: /etc/ca.pem\n"
        "items:\n"
        "  - name: a\n"
        "    speed: fast\n"
        "colour: red\n",
    )
    with pytest.raises(ConfigError) as info:
        validate(_Config, read_yaml(path))
    problems = {format_key_path(p.path): p for p in info.value.problems}
    assert set(problems) == {"broker.port", "broker.tls.ca_fil", "items[0].speed", "colour"}
    assert problems["broker.port"].line == 4
    assert problems["broker.tls.ca_fil"].line == 6
    assert problems["items[0].speed"].line == 9
    assert problems["colour"].line == 10
    assert "unknown key" in problems["colour"].message
    assert "'not-a-port'" in problems["broker.port"].message
    text = str(info.value)
    assert text.startswith("4 configuration errors:")
    assert f"{path}:4: broker.port: " in text
    assert f"{path}:6: broker.tls.ca_fil: unknown key" in text


def test_missing_required_key_names_the_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "table_id: T1\nbroker:\n  port: 1883\n")
    with pytest.raises(ConfigError) as info:
        validate(_Config, read_yaml(path))
    [problem] = info.value.problems
    assert format_key_path(problem.path) == "broker.host"
    assert problem.message == "required setting is missing"
    assert problem.line == 2  # the nearest line that exists: the broker mapping


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "table_id: T1\nbroker:\n  host: [unclosed\n  port: 1\n")
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    [problem] = info.value.problems
    assert problem.source == str(path)
    assert "YAML syntax error" in problem.message
    assert problem.line is not None


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected a mapping of settings, got list"):
        read_yaml(_write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="file not found"):
        read_yaml(tmp_path / "absent.yaml")


def test_env_override_sets_a_secret_path_and_never_echoes_values(tmp_path: Path) -> None:
    path = _write(tmp_path, "table_id: T1\nbroker:\n  host: h\n")
    raw = read_yaml(path)
    env = {
        "BACCARAT_EDGE__BROKER__PASSWORD_FILE": "/run/credentials/mqtt",
        "BACCARAT_EDGE__BROKER__PORT": "hunter2-not-a-port",
        "UNRELATED": "x",
    }
    assert apply_env_overrides(raw, env) == []
    with pytest.raises(ConfigError) as info:
        validate(_Config, raw)
    [problem] = info.value.problems
    assert problem.source == "environment variable BACCARAT_EDGE__BROKER__PORT"
    assert "hunter2" not in str(info.value)
    raw = read_yaml(path)
    apply_env_overrides(raw, {"BACCARAT_EDGE__BROKER__PASSWORD_FILE": "/run/credentials/mqtt"})
    config = validate(_Config, raw)
    assert config.broker.password_file == Path("/run/credentials/mqtt")


def test_env_override_into_a_scalar_is_reported(tmp_path: Path) -> None:
    raw = read_yaml(_write(tmp_path, "table_id: T1\nbroker:\n  host: h\n"))
    problems = apply_env_overrides(raw, {"BACCARAT_EDGE__TABLE_ID__X": "1"})
    assert len(problems) == 1
    assert "BACCARAT_EDGE__TABLE_ID__X" in str(problems[0])


def test_secret_field_values_are_not_echoed(tmp_path: Path) -> None:
    class _WithSecret(BaseModel):
        model_config = ConfigDict(extra="forbid")
        password_file: Path
        hmac_key_env: int

    raw = read_yaml(_write(tmp_path, "password_file: [1]\nhmac_key_env: s3cr3t-value\n"))
    with pytest.raises(ConfigError) as info:
        validate(_WithSecret, raw)
    assert "s3cr3t-value" not in str(info.value)
    assert len(info.value.problems) == 2
