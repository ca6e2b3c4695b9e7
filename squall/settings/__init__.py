"""Loading the crawler configuration into one frozen, typed object.

Keys are flat, dotted names (StormCrawler style). ``config/crawler-default.yaml``
holds every key with its default; a user file (``$SQUALL_CONF``, else
``config/crawler-conf.yaml``) overrides some of them. Every value must have the
type of its default (an int is accepted where a float is expected; a list holds
strings); unknown keys, values out of range and contradictory combinations
raise :class:`squall.errors.ConfigError` naming the key.
``$KAFKA_BOOTSTRAP_SERVERS`` overrides ``kafka.bootstrap.servers``.

Inside squall the result is read as attributes of :class:`Settings`: the key
``a.b.c`` is the attribute ``a_b_c`` (``-`` also becomes ``_``, camelCase
becomes snake_case), so ``fetcher.server.delay`` and
``fetcher.server.delay.force`` are the distinct ``fetcher_server_delay: float``
and ``fetcher_server_delay_force: bool``; list keys are tuples. The fields are
generated from the defaults file into :mod:`squall.settings.fields` by
``scripts/gen_settings_fields.py`` (the dotted key is each field's
``metadata["key"]``); a unit test fails while that file is stale, so every key
has exactly one typed field and no default is written in code. Every range,
choice and cross-key check is in :mod:`squall.settings.rules`, each error
naming its key. ``settings["a.b.c"]`` (the Mapping view) reads the same values
by dotted key, for callers outside squall.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from squall.errors import ConfigError
from squall.settings.fields import SettingsFields

# Dotted key → attribute name, in the order of the defaults file.
FIELD_OF: Mapping[str, str] = MappingProxyType({f.metadata["key"]: f.name for f in dataclasses.fields(SettingsFields)})

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS_FILE = ROOT / "config" / "crawler-default.yaml"
USER_FILE = ROOT / "config" / "crawler-conf.yaml"


class Settings(SettingsFields, Mapping[str, Any]):
    """The loaded configuration: frozen, typed attributes (durations in seconds), also a read-only Mapping.

    Read ``settings.fetcher_server_delay`` (typed, checked by mypy); the Mapping
    view ``settings["fetcher.server.delay"]`` stays for callers outside squall
    and returns the same value (a list key as a fresh ``list``). Build one with
    :func:`load_settings`, :meth:`with_overrides` or :meth:`from_values`;
    every value has passed :func:`squall.settings.rules.validate`.
    """

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Settings:
        """Build from a complete dotted-key mapping (no check: callers validate first).

        Raises:
            ConfigError: a key missing from or unknown to the defaults file.
        """
        missing = set(FIELD_OF) - set(values)
        if missing:
            raise ConfigError(min(missing), "missing configuration key")
        unknown = set(values) - set(FIELD_OF)
        if unknown:
            raise ConfigError(min(unknown), "unknown configuration key")
        fields: dict[str, Any] = {FIELD_OF[key]: tuple(v) if isinstance(v, list) else v for key, v in values.items()}
        return cls(**fields)

    def __getitem__(self, key: str) -> Any:
        try:
            value = getattr(self, FIELD_OF[key])
        except KeyError:
            raise ConfigError(key, "unknown configuration key") from None
        return list(value) if isinstance(value, tuple) else value

    def __contains__(self, key: object) -> bool:
        return key in FIELD_OF

    def __iter__(self) -> Iterator[str]:
        return iter(FIELD_OF)

    def __len__(self) -> int:
        return len(FIELD_OF)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """Return a new validated Settings with ``overrides`` (dotted keys) applied.

        Raises:
            ConfigError: as :func:`load_settings`.
        """
        return _validated(_merge(dict(self), overrides, "overrides"))

    @property
    def user_agent(self) -> str:
        """The User-Agent header: ``name/version (+url; email)``."""
        ua = f"{self.http_agent_name}/{self.http_agent_version}"
        extra = "; ".join(x for x in (self.http_agent_url and "+" + self.http_agent_url, self.http_agent_email) if x)
        return f"{ua} ({extra})" if extra else ua


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(None, f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(None, f"{path}: expected a mapping of key: value")
    return data


def _merge(base: dict[str, Any], overrides: Mapping[str, Any], origin: str) -> dict[str, Any]:
    for key, value in overrides.items():
        if key not in base:
            raise ConfigError(key, f"unknown configuration key (in {origin}); see {DEFAULTS_FILE.name}")
        default = base[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, list):
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise ConfigError(key, f"expected {_type_name(default)}, got {value!r} (in {origin})")
        base[key] = value
    return base


def _type_name(default: Any) -> str:
    return "list of strings" if isinstance(default, list) else type(default).__name__


def _validated(values: dict[str, Any]) -> Settings:
    from squall.settings import rules

    settings = Settings.from_values(values)
    rules.validate(settings)
    return settings


def load_settings(path: str | os.PathLike[str] | None = None, overrides: Mapping[str, Any] | None = None) -> Settings:
    """Load defaults, then the user file, then ``overrides``, then the environment.

    ``path`` defaults to ``$SQUALL_CONF``, else ``config/crawler-conf.yaml`` (a
    missing default user file is fine; a missing named file is an error).

    Raises:
        ConfigError: unknown key, wrong type, or a contradictory combination.
    """
    values = _read_yaml(DEFAULTS_FILE)
    if path is None:
        path = os.environ.get("SQUALL_CONF") or None
        user = Path(path) if path else USER_FILE
        if path and not user.is_file():
            raise ConfigError(None, f"SQUALL_CONF names {user}, which does not exist")
    else:
        user = Path(path)
        if not user.is_file():
            raise ConfigError(None, f"configuration file {user} does not exist")
    if user.is_file():
        _merge(values, _read_yaml(user), str(user))
    if overrides:
        _merge(values, overrides, "overrides")
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if env:
        values["kafka.bootstrap.servers"] = env
    return _validated(values)
