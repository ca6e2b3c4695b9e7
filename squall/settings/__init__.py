"""Loading the crawler configuration into one frozen, typed object.

Keys are flat, dotted names (StormCrawler style). ``config/crawler-default.yaml``
holds every key with its default; a user file (``$SQUALL_CONF``, else
``config/crawler-conf.yaml``) overrides some of them. Every value must have the
type of its default (an int is accepted where a float is expected); unknown
keys and contradictory combinations raise :class:`squall.errors.ConfigError`
naming the key. ``$KAFKA_BOOTSTRAP_SERVERS`` overrides ``kafka.bootstrap.servers``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from squall.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS_FILE = ROOT / "config" / "crawler-default.yaml"
USER_FILE = ROOT / "config" / "crawler-conf.yaml"
PARTITION_MODES = ("byHost", "byDomain", "byIP")


class Settings(Mapping[str, Any]):
    """Frozen mapping of configuration key → typed value (durations in seconds)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = MappingProxyType(dict(values))

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise ConfigError(key, "unknown configuration key") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "Settings":
        """Return a new validated Settings with ``overrides`` applied."""
        return Settings(_validated(_merge(dict(self._values), overrides, "overrides")))

    @property
    def user_agent(self) -> str:
        """The User-Agent header: ``name/version (+url; email)``."""
        ua = f"{self['http.agent.name']}/{self['http.agent.version']}"
        extra = "; ".join(x for x in (self["http.agent.url"] and "+" + self["http.agent.url"], self["http.agent.email"]) if x)
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
            ok = isinstance(value, list)
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise ConfigError(key, f"expected {type(default).__name__}, got {value!r} (in {origin})")
        base[key] = value
    return base


def _validated(values: dict[str, Any]) -> dict[str, Any]:
    from squall.settings import rules as config_rules

    config_rules.validate(values)
    return values


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
    return Settings(_validated(values))
