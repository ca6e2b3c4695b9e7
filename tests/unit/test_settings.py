"""Tests of squall.settings and squall.settings.rules: strict config, keys named, robots pacing's configuration contract."""

from __future__ import annotations

import dataclasses
import os
import re
import runpy
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from squall.errors import ConfigError
from squall.settings import DEFAULTS_FILE, FIELD_OF, ROOT, Settings, load_settings, rules
from squall.settings import fields as fields_module
from squall.settings.fields import SettingsFields

DEFAULTS = yaml.safe_load(DEFAULTS_FILE.read_text(encoding="utf-8"))
KEY_LINE = re.compile(r"^([A-Za-z][\w.\-]*)\s*:")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No $SQUALL_CONF nor $KAFKA_BOOTSTRAP_SERVERS from the caller's shell leaks into these tests."""
    monkeypatch.delenv("SQUALL_CONF", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)


@pytest.fixture
def conf(tmp_path):
    """Write a user configuration file and return its path."""

    def write(text: str, name: str = "crawler-conf.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def defaults(conf) -> Settings:
    return load_settings(conf("{}\n"))


# ---------------------------------------------------------------- defaults and their documentation


def test_the_defaults_load_unchanged_from_an_empty_user_file(defaults):
    assert dict(defaults) == DEFAULTS


def test_the_default_user_file_loads():
    settings = load_settings()
    assert set(settings) == set(DEFAULTS)


def test_settings_are_frozen_and_an_unknown_key_lookup_names_the_key(defaults):
    with pytest.raises(TypeError):
        defaults["fetcher.server.delay"] = 5.0  # type: ignore[index]
    with pytest.raises(ConfigError) as err:
        defaults["no.such.key"]
    assert err.value.key == "no.such.key"


def _key_lines(text: str) -> list[tuple[int, str]]:
    return [(i, m.group(1)) for i, line in enumerate(text.splitlines()) if (m := KEY_LINE.match(line))]


def test_the_text_scan_of_the_defaults_file_finds_every_key():
    assert sorted(k for _, k in _key_lines(DEFAULTS_FILE.read_text())) == sorted(DEFAULTS)


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_every_default_key_is_documented_by_a_comment_above_it_or_on_its_line(key):
    lines = DEFAULTS_FILE.read_text(encoding="utf-8").splitlines()
    [index] = [i for i, k in _key_lines("\n".join(lines)) if k == key]
    value = re.sub(r'"[^"]*"|\'[^\']*\'', "", lines[index].split(":", 1)[1])  # quoted strings may hold '#'
    if re.search(r"\s#\s*\S", value):
        return  # an inline comment
    i = index - 1
    while i >= 0 and KEY_LINE.match(lines[i]):  # a group of keys under one comment
        i -= 1
    assert i >= 0 and lines[i].startswith("#"), f"{key} has no comment line above its group"
    assert not re.fullmatch(r"#\s*-+.*", lines[i]), f"{key} sits under a section header only"


# ---------------------------------------------------------------- strict loading


def test_an_unknown_key_in_the_user_file_is_refused_with_its_name(conf):
    with pytest.raises(ConfigError) as err:
        load_settings(conf("fetcher.server.delay: 2.0\nfetcher.sever.delay: 3.0\n"))
    assert err.value.key == "fetcher.sever.delay"
    assert "fetcher.sever.delay" in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("fetcher.server.delay", '"fast"'),
        ("fetcher.server.delay", "true"),        # a bool is not a number
        ("topology.partitions", "8.5"),          # a float is not an int
        ("topology.partitions", "true"),
        ("topology.partitions", '"8"'),
        ("fetcher.max.crawl.delay.force", '"yes"'),
        ("fetcher.max.crawl.delay.force", "1"),
        ("metadata.persist", "robots.crawl.delay"),  # a string is not a list
        ("kafka.bootstrap.servers", "9092"),
        ("partition.url.mode", ""),              # null
    ],
)
def test_a_value_of_the_wrong_type_is_refused_with_its_key(conf, key, value):
    with pytest.raises(ConfigError) as err:
        load_settings(conf(f"{key}: {value}\n"))
    assert err.value.key == key


def test_an_int_is_accepted_where_a_float_is_expected(conf):
    settings = load_settings(conf("fetcher.server.delay: 2\nhttp.timeout.total: 15\n"))
    assert settings["fetcher.server.delay"] == 2.0 and isinstance(settings["fetcher.server.delay"], float)
    assert isinstance(settings["http.timeout.total"], float)


@pytest.mark.parametrize(("text", "why"), [("a: [1, 2\n", "not valid YAML"), ("- a\n- b\n", "mapping")])
def test_a_user_file_that_is_not_a_yaml_mapping_is_refused(conf, text, why):
    with pytest.raises(ConfigError, match=why):
        load_settings(conf(text))


def test_kafka_bootstrap_servers_from_the_environment_wins_over_the_files(conf, monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "broker-a:9092,broker-b:9092")
    settings = load_settings(conf('kafka.bootstrap.servers: "file:9092"\n'))
    assert settings["kafka.bootstrap.servers"] == "broker-a:9092,broker-b:9092"


def test_squall_conf_names_the_user_file(conf, monkeypatch):
    monkeypatch.setenv("SQUALL_CONF", str(conf("fetcher.server.delay: 7.5\n", name="mine.yaml")))
    assert load_settings()["fetcher.server.delay"] == 7.5


def test_squall_conf_naming_a_missing_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUALL_CONF", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="missing.yaml"):
        load_settings()


def test_an_explicit_path_to_a_missing_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.yaml")


def test_overrides_are_applied_after_the_user_file_and_checked_the_same_way(conf):
    path = conf("fetcher.server.delay: 2.0\n")
    assert load_settings(path, overrides={"fetcher.server.delay": 4})["fetcher.server.delay"] == 4.0
    with pytest.raises(ConfigError) as err:
        load_settings(path, overrides={"no.such.key": 1})
    assert err.value.key == "no.such.key"


def test_with_overrides_returns_a_new_validated_settings_object(defaults):
    changed = defaults.with_overrides({"fetcher.server.delay": 3})
    assert changed["fetcher.server.delay"] == 3.0
    assert defaults["fetcher.server.delay"] == DEFAULTS["fetcher.server.delay"]
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({"fetcher.server.delay": -3.0})
    assert err.value.key == "fetcher.server.delay"


# ---------------------------------------------------------------- cross-key rules (config_rules)


def test_partition_mode_by_ip_is_accepted(defaults):
    assert defaults.with_overrides({"partition.url.mode": "byIP"})["partition.url.mode"] == "byIP"


@pytest.mark.parametrize("key, value", [("partition.ip.cache.secs", 0.0), ("partition.ip.cache.size", 0)])
def test_a_by_ip_cache_key_out_of_range_stops_the_worker_naming_it(defaults, key, value):
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({"partition.url.mode": "byIP", key: value})
    assert err.value.key == key


def test_robots_pacing_still_needs_by_host_not_by_ip(defaults):
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({"partition.url.mode": "byIP", "frontier.robots.crawl.delay.enabled": True,
                                 "fetcher.max.crawl.delay.force": True})
    assert err.value.key == "partition.url.mode"


@pytest.mark.parametrize("mode", ["byhost", "byPath", ""])
def test_an_unknown_partition_mode_is_refused(defaults, mode):
    with pytest.raises(ConfigError, match="unknown mode") as err:
        defaults.with_overrides({"partition.url.mode": mode})
    assert err.value.key == "partition.url.mode"


def test_partition_mode_by_domain_is_accepted_without_robots_pacing(defaults):
    assert defaults.with_overrides({"partition.url.mode": "byDomain"})["partition.url.mode"] == "byDomain"


@pytest.mark.parametrize(
    "key",
    [
        "fetcher.server.delay", "fetcher.server.min.delay", "fetcher.max.crawl.delay",
        "http.timeout.connect", "http.timeout.read", "http.timeout.total",
        "frontier.backoff.base.secs", "frontier.backoff.max.secs", "frontier.tick.interval.secs",
        ("frontier.inflight.timeout.secs"),
        ("kafka.session.timeout.secs"),
        ("frontier.robots.delay.decay.secs"),
        ("frontier.takeover.grace.secs"),
    ],
)
def test_a_negative_delay_or_timeout_is_refused_with_its_key(defaults, key):
    bad = -1.0 if isinstance(DEFAULTS[key], float) else -1
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({key: bad})
    assert err.value.key == key


@pytest.mark.parametrize(
    "key",
    [
        "topology.partitions", "fetcher.threads.number", "fetcher.threads.per.queue",
        "frontier.max.urls.per.bucket", "max.fetch.errors", "http.redirect.max",
        ("fetcher.server.burst"),
        ("topology.replication.factor"),
    ],
)
def test_a_count_below_one_is_refused_with_its_key(defaults, key):
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({key: 0})
    assert err.value.key == key


# ---------------------------------------------------------------- robots pacing: the configuration robots pacing requires

ROBOTS_PACING = {
    "frontier.robots.crawl.delay.enabled": True,
    "partition.url.mode": "byHost",
    "fetcher.max.crawl.delay.force": True,
    "frontier.max.urls.per.bucket": 1,
    "metadata.persist": ["robots.crawl.delay"],
    "metadata.transfer": ["depth", "robots.txt.*"],  # neither matches robots.crawl.delay
}


def test_robots_pacing_with_the_full_contract_loads(defaults, conf):
    settings = defaults.with_overrides(ROBOTS_PACING)
    assert settings["frontier.robots.crawl.delay.enabled"] is True
    assert load_settings(conf(yaml.safe_dump(ROBOTS_PACING)))["metadata.persist"] == ["robots.crawl.delay"]


@pytest.mark.parametrize(
    ("override", "named_key"),
    [
        ({"partition.url.mode": "byDomain"}, "partition.url.mode"),
        ({"fetcher.max.crawl.delay.force": False}, "fetcher.max.crawl.delay.force"),
        ({"metadata.persist": []}, "metadata.persist"),
        ({"metadata.persist": ["robots.*"]}, "metadata.persist"),  # persist needs the key itself
        ({"metadata.transfer": ["robots.crawl.delay"]}, "metadata.transfer"),
        ({"metadata.transfer": ["robots.*"]}, "metadata.transfer"),
        ({"metadata.transfer": ["robots.crawl*"]}, "metadata.transfer"),
        ({"metadata.transfer": ["depth", "*"]}, "metadata.transfer"),
    ],
    ids=["byDomain", "no-force", "persist-empty", "persist-wildcard", "transfer-exact",
         "transfer-robots-wildcard", "transfer-prefix", "transfer-star"],
)
def test_robots_pacing_refuses_each_broken_term_of_the_contract_naming_it(defaults, override, named_key):
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({**ROBOTS_PACING, **override})
    assert err.value.key == named_key
    assert named_key in str(err.value)


def test_without_robots_pacing_the_contract_does_not_apply(defaults):
    settings = defaults.with_overrides({**ROBOTS_PACING, "frontier.robots.crawl.delay.enabled": False,
                                        "partition.url.mode": "byDomain", "frontier.max.urls.per.bucket": 3,
                                        "metadata.transfer": ["*"], "metadata.persist": []})
    assert settings["metadata.transfer"] == ["*"]


def test_a_contract_breach_in_the_user_file_fails_at_load(conf):
    with pytest.raises(ConfigError) as err:
        load_settings(conf("frontier.robots.crawl.delay.enabled: true\nfetcher.max.crawl.delay.force: true\n"
                           'metadata.persist: ["robots.crawl.delay"]\nmetadata.transfer: ["robots.*"]\n'))
    assert err.value.key == "metadata.transfer"


# ---------------------------------------------------------------- derived values


@pytest.mark.parametrize(
    ("url", "email", "expected"),
    [
        ("", "", "bot/2.0"),
        ("https://example.org/bot", "", "bot/2.0 (+https://example.org/bot)"),
        ("https://example.org/bot", "ops@example.org", "bot/2.0 (+https://example.org/bot; ops@example.org)"),
        ("", "ops@example.org", "bot/2.0 (ops@example.org)"),
    ],
)
def test_the_user_agent_is_built_from_the_agent_keys(defaults, url, email, expected):
    settings = defaults.with_overrides({"http.agent.name": "bot", "http.agent.version": "2.0",
                                        "http.agent.url": url, "http.agent.email": email})
    assert settings.user_agent == expected


# ---------------------------------------------------------------- the typed object (squall.settings.fields)

GENERATOR = runpy.run_path(str(Path(__file__).resolve().parents[2] / "scripts" / "gen_settings_fields.py"))
YAML_TYPES = {bool: bool, int: int, float: float, str: str, list: tuple}


def test_the_generated_fields_file_is_current():
    """Run ``.venv/bin/python scripts/gen_settings_fields.py`` after changing a key of the defaults file."""
    expected = GENERATOR["render"](DEFAULTS_FILE.read_text(encoding="utf-8"))
    assert (Path(fields_module.__file__)).read_text(encoding="utf-8") == expected


def test_the_fields_and_the_defaults_file_have_the_same_keys_and_types():
    hints = typing.get_type_hints(SettingsFields)
    by_key = {f.metadata["key"]: f for f in dataclasses.fields(SettingsFields)}
    assert set(by_key) == set(DEFAULTS)
    for key, f in by_key.items():
        hint = hints[f.name]
        assert (typing.get_origin(hint) or hint) is YAML_TYPES[type(DEFAULTS[key])], key
        assert f.default is dataclasses.MISSING, f"{key}: a default in code"


@pytest.mark.parametrize(("key", "attribute"), [
    ("fetcher.server.delay", "fetcher_server_delay"),
    ("fetcher.server.delay.force", "fetcher_server_delay_force"),
    ("fetchInterval.fetch.error", "fetch_interval_fetch_error"),
    ("http.robots.403.allow", "http_robots_403_allow"),
])
def test_a_dotted_key_is_read_as_its_attribute(key, attribute):
    assert GENERATOR["attribute_name"](key) == attribute
    assert FIELD_OF[key] == attribute


def test_every_attribute_holds_the_value_of_its_key(defaults):
    for key, name in FIELD_OF.items():
        value = getattr(defaults, name)
        assert value == (tuple(DEFAULTS[key]) if isinstance(DEFAULTS[key], list) else DEFAULTS[key]), key
        assert defaults[key] == DEFAULTS[key]


def test_the_object_is_frozen_hashable_and_its_lists_are_tuples(defaults):
    with pytest.raises(dataclasses.FrozenInstanceError):
        defaults.fetcher_server_delay = 5.0  # type: ignore[misc]
    assert isinstance(defaults.metadata_persist, tuple)
    assert hash(defaults) == hash(load_settings(DEFAULTS_FILE))
    view = defaults["metadata.persist"]
    view.append("x")  # the Mapping view hands out a copy
    assert defaults["metadata.persist"] == DEFAULTS["metadata.persist"]


def test_a_key_name_that_two_keys_would_share_is_refused_by_the_generator():
    with pytest.raises(ValueError, match="both give"):
        GENERATOR["render"]("# ---- s\n# a\na.b: 1\n# b\na-b: 2\n")


def test_a_settings_object_needs_every_key():
    values = dict(DEFAULTS)
    del values["http.robots.5xx.allow"]
    with pytest.raises(ConfigError) as err:
        Settings.from_values(values)
    assert err.value.key == "http.robots.5xx.allow"


def test_a_list_key_takes_only_strings(defaults):
    with pytest.raises(ConfigError, match="list of strings") as err:
        defaults.with_overrides({"http.resolve": [42]})
    assert err.value.key == "http.resolve"


# ---------------------------------------------------------------- every range rule, by its table (squall.settings.rules)

RANGE_CASES = (
    [(key, -1) for key in rules.NOT_NEGATIVE]
    + [(key, 0) for key in rules.POSITIVE]
    + [(key, 0) for key in rules.AT_LEAST_ONE]
    + [(key, -2) for key in rules.MINUS_ONE_OR_NOT_NEGATIVE]
    + [(key, 0) for key in rules.MINUS_ONE_OR_AT_LEAST_ONE]
    + [("sitemap.max.nesting", -1), ("http.robots.cache.ttl.secs", 0), ("http.robots.cache.ttl.secs", 86401),
       ("http.robots.retry.max.secs", 1.0), ("frontier.backoff.max.secs", 0.5)]
)


@pytest.mark.parametrize(("key", "bad"), RANGE_CASES, ids=[f"{k}={v}" for k, v in RANGE_CASES])
def test_a_value_out_of_range_is_refused_naming_its_key(defaults, key, bad):
    value = float(bad) if isinstance(DEFAULTS[key], float) else bad
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({key: value})
    assert err.value.key == key
    assert str(err.value).startswith(f"{key}: ")


def test_the_range_tables_name_only_keys_of_the_defaults_file():
    tables = (rules.NOT_NEGATIVE, rules.POSITIVE, rules.AT_LEAST_ONE, rules.MINUS_ONE_OR_NOT_NEGATIVE,
              rules.MINUS_ONE_OR_AT_LEAST_ONE)
    named = [key for table in tables for key in table]
    assert set(named) <= set(DEFAULTS) and len(named) == len(set(named))


@pytest.mark.parametrize(("key", "value"), [
    ("http.robots.agents", ["/1.0"]), ("http.agent.name", "42"), ("urlfilters.regex.include", ["(unclosed"]),
    ("urlfilters.domains.allow", ["co.uk"]), ("http.private.networks.allow", ["10.0.0.1/8"]),
    ("http.resolve", ["a.test:80"]), ("render.resources.skip", ["pictures"]), ("render.resources.skip", ["document"]),
    ("sitemap.default.path", "sitemap.xml"), ("kafka.group.instance.id", "{pid}"),
])
def test_a_bad_choice_is_refused_naming_its_key(defaults, key, value):
    with pytest.raises(ConfigError) as err:
        defaults.with_overrides({key: value})
    assert err.value.key == key


@pytest.mark.parametrize(("line", "key"), [
    ("http.robots.cache.lru.size: 0", "http.robots.cache.lru.size"),  # once checked only when the fetcher started
    ("http.timeout.read: 0.0", "http.timeout.read"),
    ("fetcher.recent.fetch.ids: 0", "fetcher.recent.fetch.ids"),
])
def test_a_value_out_of_range_stops_the_worker_at_import_with_one_line_naming_the_key(tmp_path, line, key):
    conf = tmp_path / "crawler-conf.yaml"
    conf.write_text(line + "\n", encoding="utf-8")
    env = dict(os.environ, SQUALL_CONF=str(conf))
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    done = subprocess.run([sys.executable, "-c", "import topology"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith(f"squall: configuration error: {key}:")


def test_no_from_settings_checks_a_value_itself():
    """Checks live in squall.settings.rules; a ``from_settings`` copies (NetworkPolicy parses its entries)."""
    import ast

    raising = []
    for path in sorted((ROOT / "squall").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "from_settings":
                if any(isinstance(n, ast.Raise) for n in ast.walk(node)):
                    raising.append(f"{path.relative_to(ROOT)}")
    assert raising == ["squall/policy/netsafety.py"]
