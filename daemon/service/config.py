"""The daemon's configuration: one YAML file composing every component's settings.

Sections (every one validated by its owner's pydantic model, unknown keys refused):

* ``table_id`` and ``state_dir``;
* ``log`` and ``service`` (this package: log level/format, tick, watchdog, shutdown);
* ``table``: :class:`daemon.engine.settings.TableSettings`;
* ``readers``: a list of ``{name, driver, settings}``; ``settings`` is validated by the
  model of the named driver (``drivers.registry``), imported only when configured;
* ``camera``: optional ``{name, settings}`` for the fallback camera;
* ``journal``: :class:`daemon.journal.settings.JournalSettings`;
* ``broker``: :class:`daemon.mqtt.settings.BrokerSettings`.

:func:`load_config` reports every problem of the file at once (see ``configfile``): YAML,
unknown keys (and keys given twice), wrong types, each driver's settings, an unknown variant,
every secret (broker password, signing keys) that cannot be read or that others may read, and
every TLS file that cannot be used (missing, not PEM, a key not the certificate's, a client
certificate out of its validity) — before anything is created on disk.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from common.yamlfile import KeyPath
from daemon.attestation.settings import AttestationSettings
from daemon.engine.settings import TableSettings
from daemon.journal.settings import JournalSettings
from daemon.mqtt.secrets import SecretError, SecretSource
from daemon.mqtt.settings import AuthSettings, BrokerSettings, SigningSettings, TlsSettings
from daemon.mqtt.tls import check_tls_files
from daemon.mqtt.topics import TopicError, validate_table_id
from daemon.rules.variants import (
    Variant,
    VariantError,
    is_variant_path,
    load_variant,
    load_variant_by_name,
    shipped_variant_names,
)
from daemon.service.clock_status import ClockSettings
from daemon.service.configfile import (
    ConfigError,
    ConfigProblem,
    RawConfig,
    apply_env_overrides,
    problems_from_validation,
    read_yaml,
    set_override,
)
from daemon.service.device_checks import check_betting_inputs, check_camera_devices
from daemon.service.device_checks import device_name as device_name  # re-exported: runner, check-config
from daemon.service.game_flow_config import game_flow_problems
from daemon.service.reveal_config import reveal_problems
from daemon.shipped import shipped_config_dir

CONFIG_DIR = shipped_config_dir()
DEFAULTS_FILE = CONFIG_DIR / "defaults.yaml"
"""Embedded defaults: the demo's configuration (no hardware; device and broker filled in)."""

JOURNAL_FILE_NAME = "journal.sqlite3"

PartT = TypeVar("PartT", bound=BaseModel)


class LogSettings(BaseModel):
    """Log level and format (``auto``: JSON lines under systemd or when piped, console on a TTY)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Least severe level logged (SIGHUP applies a change at once)."
    )
    format: Literal["auto", "json", "console"] = Field(
        default="auto", description="auto: JSON lines under systemd or when piped, console on a terminal."
    )


class ServiceSettings(BaseModel):
    """How the runner paces itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tick_interval_s: float = Field(
        default=0.25, gt=0, le=5, description="Clock ticks fed to the engine when no input arrives."
    )
    watchdog_stall_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="A worker without progress this long stops watchdog pings.",
    )
    health_interval_s: float = Field(default=10.0, gt=0, le=3600, description="How often health is logged.")
    shutdown_timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="Time allowed to flush the journal to the broker on stop."
    )
    input_queue_max: int = Field(
        default=10_000,
        ge=100,
        description="Queue depth at which a warning is logged (the queue is unbounded: no input is dropped).",
    )
    clock: ClockSettings = Field(default_factory=ClockSettings)


class ReaderSection(BaseModel):
    """One card reader: a driver from ``drivers.registry`` and that driver's own settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    driver: str = Field(description="Driver name, e.g. angel_eye, ascii_lines, usb_hid.")
    settings: Any = Field(default_factory=dict, description="The driver's settings (validated by it).")


class CameraSection(BaseModel):
    """The optional fallback camera (``drivers.camera``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="false keeps the section but does not start the camera.")
    settings: Any = Field(default_factory=dict, description="CameraSettings (validated by the camera).")


class DaemonConfig(BaseModel):
    """The whole daemon configuration of one table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table_id: str = Field(description="This table's id: one topic level, e.g. T07.")
    state_dir: Path = Field(
        default=Path("/var/lib/baccarat-edge"),
        description="Journal and runtime state; journal.path defaults to <state_dir>/journal.sqlite3 "
        "and a relative journal.path is relative to it.",
    )
    log: LogSettings = Field(default_factory=lambda: LogSettings.model_validate({}))
    service: ServiceSettings = Field(default_factory=lambda: ServiceSettings.model_validate({}))
    table: TableSettings = Field(default_factory=lambda: TableSettings.model_validate({}))
    readers: list[ReaderSection] = Field(min_length=1, description="The shoe's reader(s).")
    camera: CameraSection | None = None
    journal: JournalSettings = JournalSettings()
    broker: BrokerSettings = BrokerSettings()
    attestation: AttestationSettings = AttestationSettings()

    @field_validator("table_id")
    @classmethod
    def _usable_in_topics(cls, value: str) -> str:
        try:
            return validate_table_id(value)
        except TopicError as exc:
            raise ValueError(str(exc)) from None


READER_DRIVERS = ("angel_eye", "ascii_lines", "usb_hid")
"""Registry names that are card readers (``camera`` has its own section)."""


def driver_settings_model(driver: str) -> type[BaseModel]:
    """The settings model of a registered reader driver (imports only that driver).

    Raises KeyError for a name that is not a reader driver.
    """
    from drivers.registry import load

    if driver not in READER_DRIVERS:
        raise KeyError(driver)
    return load(driver).settings


def camera_settings_model() -> type[BaseModel]:
    from drivers.registry import load

    return load("camera").settings


class LoadedConfig:
    """A validated configuration with its drivers' settings objects and where it came from."""

    def __init__(
        self,
        config: DaemonConfig,
        reader_settings: list[BaseModel],
        camera_settings: BaseModel | None,
        source: str,
        variant: Variant,
        secret_digests: Mapping[str, str] | None = None,
    ) -> None:
        self.variant = variant
        self.config = config
        self.reader_settings = reader_settings
        self.camera_settings = camera_settings
        self.source = source
        self.secret_digests: dict[str, str] = dict(secret_digests or {})
        """Keyed digests of the broker secrets and TLS files as loaded (:func:`secret_digests`)."""


def load_config(
    path: Path | None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[KeyPath, Any] | None = None,
    *,
    check_secrets: bool = True,
    tls_dates: bool = True,
) -> LoadedConfig:
    """Read, override and validate a config file (the embedded defaults when ``path`` is None).

    Raises ConfigError listing every problem: YAML syntax, keys given twice, unknown keys,
    wrong types, bad driver settings, an unknown variant and (with ``check_secrets``) every
    secret that cannot be read or is open to others and every unusable TLS file, each naming
    the file (or environment variable), line and key path.
    Nothing is created or changed: a caller can rely on a config that loads before any
    side effect. ``check_secrets=False`` is for tools that only read the file's shape.
    ``tls_dates=False`` (``run`` and its reloads) leaves out a TLS certificate outside its
    dates: a clock may be wrong at boot, so the daemon watches that at runtime
    (:mod:`daemon.mqtt.tls_dates`) instead of refusing to start.
    """
    raw = read_yaml(path if path is not None else DEFAULTS_FILE)
    problems = apply_env_overrides(raw, environ)
    for key_path, value in (overrides or {}).items():
        set_override(raw, key_path, value, "command line")
    return validate_raw(raw, problems, check_secrets=check_secrets, tls_dates=tls_dates)


def validate_raw(
    raw: RawConfig,
    problems: list[ConfigProblem] | None = None,
    *,
    check_secrets: bool = True,
    tls_dates: bool = True,
) -> LoadedConfig:
    """Validate parsed YAML: outer model, each driver's settings, variant, secrets — all at once."""
    found = list(problems or [])
    config: DaemonConfig | None = None
    try:
        config = DaemonConfig.model_validate(raw.data)
    except ValidationError as exc:
        found.extend(problems_from_validation(raw, exc))
    reader_settings, camera_settings = _validate_device_settings(raw, found)
    _check_unique_names(raw, reader_settings, camera_settings, found)
    if config is not None:
        check_camera_devices(raw, config, reader_settings, camera_settings, found=found)
        check_betting_inputs(raw, config, reader_settings, found)
        found.extend(
            game_flow_problems(raw, config.table, config.broker.signing, [r.driver for r in config.readers])
        )
        found.extend(reveal_problems(raw, config.table, config.broker.signing, reader_settings))
    variant = _load_variant(raw, _variant_name(raw, config), found)
    if check_secrets:
        broker = config.broker if config is not None else None
        auth = broker.auth if broker is not None else _broker_part(raw, "auth", AuthSettings)
        signing = broker.signing if broker is not None else _broker_part(raw, "signing", SigningSettings)
        tls = broker.tls if broker is not None else _broker_part(raw, "tls", TlsSettings)
        _check_secrets(raw, auth, signing, found)
        if tls is not None:
            _check_tls_files(raw, tls, found, dates=tls_dates)
    if found or config is None or variant is None:
        raise ConfigError(found)
    config = _resolve_paths(config, raw)
    digests = secret_digests(config.broker) if check_secrets else {}
    return LoadedConfig(config, reader_settings, camera_settings, raw.source, variant, digests)


def _check_unique_names(
    raw: RawConfig, readers: list[BaseModel], camera: BaseModel | None, found: list[ConfigProblem]
) -> None:
    names = [device_name(r, "reader") for r in readers]
    if camera is not None:
        names.append(device_name(camera, "camera"))
    for index, name in enumerate(names):
        if name in names[:index]:
            path: KeyPath = (
                ("camera", "settings", "device")
                if camera is not None and index == len(names) - 1
                else ("readers", index, "settings", "device_name")
            )
            source, line = raw.describe(path)
            found.append(
                ConfigProblem(source, path, f"device name {name!r} is used twice; give each its own", line)
            )


def _variant_name(raw: RawConfig, config: DaemonConfig | None) -> str:
    """The variant named by the file, even when other keys failed validation."""
    if config is not None:
        return config.table.variant
    table = raw.data.get("table")
    named = table.get("variant") if isinstance(table, dict) else None
    if isinstance(named, str):
        return named
    return TableSettings.model_fields["variant"].get_default(call_default_factory=True)  # type: ignore[no-any-return]


def _broker_part(raw: RawConfig, key: str, model: type[PartT]) -> PartT | None:
    """One ``broker`` subsection on its own, when the file failed elsewhere: its secrets and
    files are still checked, so every error is reported at once."""
    broker = raw.data.get("broker")
    try:
        return model.model_validate((broker.get(key) if isinstance(broker, dict) else None) or {})
    except ValidationError:
        return None  # already reported by the outer pass (or, for auth, not configured)


def _check_secrets(
    raw: RawConfig, auth: AuthSettings | None, signing: SigningSettings | None, found: list[ConfigProblem]
) -> None:
    """Every secret the broker section names can be read now (its value is never reported)."""
    named: list[tuple[KeyPath, SecretSource | None]] = [
        (("broker", "auth", "password"), auth.password if auth is not None else None),
        (("broker", "signing", "events_key"), signing.events_key if signing is not None else None),
        (("broker", "signing", "command_key"), signing.command_key if signing is not None else None),
    ]
    for index, key in enumerate(signing.command_keys if signing is not None else ()):
        named.append((("broker", "signing", "command_keys", index, "secret"), key.secret))
    for key_path, secret in named:
        if secret is None:
            continue
        try:
            secret.load()
        except SecretError as exc:
            source, line = raw.describe(key_path)
            found.append(ConfigProblem(source, key_path, str(exc), line))


def _check_tls_files(raw: RawConfig, tls: TlsSettings, found: list[ConfigProblem], *, dates: bool) -> None:
    """Every TLS file ``broker.tls`` names loads as the connection will load it (and, with
    ``dates``, is within its validity dates: ``run`` watches those at runtime instead)."""
    for problem in check_tls_files(tls):
        if problem.dated and not dates:
            continue
        key_path: KeyPath = ("broker", "tls", problem.key)
        source, line = raw.describe(key_path)
        found.append(ConfigProblem(source, key_path, f"{problem.path}: {problem.message}", line))


def _load_variant(raw: RawConfig, name: str, found: list[ConfigProblem]) -> Variant | None:
    """The shipped variant ``name``, or the variant file it names (relative to the config file's folder)."""
    try:
        if is_variant_path(name):
            return load_variant(variant_file_path(raw.source, name))
        return load_variant_by_name(name)
    except VariantError as exc:
        source, line = raw.describe(("table", "variant"))
        # The shipped names help only a mistyped name, not a broken file of the table's own.
        hint = "" if is_variant_path(name) else f" (shipped: {', '.join(shipped_variant_names())})"
        found.append(ConfigProblem(source, ("table", "variant"), f"{exc}{hint}", line))
        return None


def variant_file_path(config_source: str, setting: str) -> Path:
    """Where a ``table.variant`` path points: absolute, or relative to the config file's folder."""
    path = Path(setting).expanduser()
    return path if path.is_absolute() else Path(config_source).parent / path


def _validate_device_settings(
    raw: RawConfig, found: list[ConfigProblem]
) -> tuple[list[BaseModel], BaseModel | None]:
    readers_raw = raw.data.get("readers")
    reader_settings: list[BaseModel] = []
    if isinstance(readers_raw, list):
        for index, entry in enumerate(readers_raw):
            if not isinstance(entry, dict) or not isinstance(entry.get("driver"), str):
                continue  # the outer pass already reported it
            where: KeyPath = ("readers", index, "settings")
            try:
                model = driver_settings_model(entry["driver"])
            except KeyError:
                source, line = raw.describe(("readers", index, "driver"))
                found.append(
                    ConfigProblem(
                        source,
                        ("readers", index, "driver"),
                        f"unknown driver {entry['driver']!r} (known: {', '.join(READER_DRIVERS)})",
                        line,
                    )
                )
                continue
            settings = _validate_section(raw, model, entry.get("settings") or {}, where, found=found)
            if settings is not None:
                reader_settings.append(settings)
    camera_raw = raw.data.get("camera")
    camera_settings: BaseModel | None = None
    if isinstance(camera_raw, dict) and camera_raw.get("enabled", True) is not False:
        camera_settings = _validate_section(
            raw,
            camera_settings_model(),
            camera_raw.get("settings") or {},
            ("camera", "settings"),
            found=found,
        )
    return reader_settings, camera_settings


def _validate_section(
    raw: RawConfig, model: type[BaseModel], data: Any, where: KeyPath, *, found: list[ConfigProblem]
) -> BaseModel | None:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        found.extend(problems_from_validation(raw, exc, prefix=where))
        return None


def _resolve_paths(config: DaemonConfig, raw: RawConfig) -> DaemonConfig:
    """A journal path left unset lives in ``state_dir``; a relative one is relative to it."""
    journal_raw = raw.data.get("journal")
    explicit = isinstance(journal_raw, dict) and "path" in journal_raw
    path = config.journal.path if explicit else Path(JOURNAL_FILE_NAME)
    if not path.is_absolute():
        path = config.state_dir / path
    if path == config.journal.path:
        return config
    journal = config.journal.model_copy(update={"path": path})
    return config.model_copy(update={"journal": journal})


RELOADABLE: tuple[str, ...] = ("log", "broker", "service.health_interval_s", "service.watchdog_stall_s")
"""Settings a SIGHUP applies in place; any other change is reported as needing a restart."""


_DIGEST_KEY = os.urandom(32)
"""Per-process key of the secret digests: they compare contents within one run and fingerprint
nothing outside it (a digest that reached a log could not be matched against a guessed secret)."""


def _digest(value: bytes) -> str:
    return hashlib.blake2b(value, key=_DIGEST_KEY, digest_size=16).hexdigest()


def secret_digests(broker: BrokerSettings) -> dict[str, str]:
    """Keyed digests of what the broker's secrets and TLS files hold now, by key path.

    Settings name only *where* a secret lives, so a password or key rotated in place (same
    file, new content) leaves them equal; these digests differ. Never log them. A secret or
    TLS file that cannot be read gets a marker digest (load_config already reports both).
    """
    out: dict[str, str] = {}
    secrets: list[tuple[str, SecretSource | None]] = [
        ("broker.auth.password", broker.auth.password if broker.auth is not None else None),
        ("broker.signing.events_key", broker.signing.events_key),
        ("broker.signing.command_key", broker.signing.command_key),
    ]
    # Keyed by key id: a key added, revoked or rotated in place changes the digests.
    secrets += [(f"broker.signing.command_keys.{k.key_id}", k.secret) for k in broker.signing.command_keys]
    for name, source in secrets:
        if source is None:
            continue
        try:
            out[name] = _digest(source.load().reveal())
        except SecretError:
            out[name] = "unreadable"
    if broker.tls.enabled:
        files = (
            ("ca_file", broker.tls.ca_file),
            ("cert_file", broker.tls.cert_file),
            ("key_file", broker.tls.key_file),
        )
        for name, path in files:
            if path is None:
                continue
            try:
                out[f"broker.tls.{name}"] = _digest(path.read_bytes())
            except OSError:
                out[f"broker.tls.{name}"] = "unreadable"
    return out


def rotated_secrets(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Key paths of the secrets and TLS files configured in both loads whose contents differ
    (names only, never values). A secret added or removed (e.g. a keyring key) is a change
    of the settings themselves, not a rotation."""
    return sorted(name for name in set(old) & set(new) if old[name] != new[name])


def changed_sections(
    old: DaemonConfig,
    new: DaemonConfig,
    old_secrets: Mapping[str, str] | None = None,
    new_secrets: Mapping[str, str] | None = None,
) -> list[str]:
    """Dotted names of the top-level sections (and service keys) that differ.

    With the secret digests of both loads (``LoadedConfig.secret_digests``), a secret or TLS
    file whose content changed in place marks ``broker`` as changed too.
    """
    changed: list[str] = []
    old_dump, new_dump = old.model_dump(mode="json"), new.model_dump(mode="json")
    for key in new_dump:
        if key == "service":
            old_service, new_service = old_dump["service"], new_dump["service"]
            changed.extend(f"service.{k}" for k in new_service if new_service[k] != old_service[k])
        elif new_dump[key] != old_dump[key]:
            changed.append(key)
    if (
        "broker" not in changed
        and old_secrets is not None
        and new_secrets is not None
        and rotated_secrets(old_secrets, new_secrets)
    ):
        changed.append("broker")
    return changed


def config_digest(config: DaemonConfig, variant: Variant) -> str:
    """sha256 (hex) of what a table runs with: the RFC 8785 canonical JSON of the validated
    config (defaults filled in, secrets named by where they live, never their values) and the
    pay table's digest. Published in the retained status and printed by ``check-config``, so
    ``fleet`` shows which tables run the same configuration."""
    from daemon.mqtt.canonical import canonical_json

    body = {"config": config.model_dump(mode="json"), "variant_digest": variant.digest}
    return hashlib.sha256(canonical_json(body)).hexdigest()
