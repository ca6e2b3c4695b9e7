"""squall.worker.membership: stable, unique, valid group.instance.id values for static membership."""

from __future__ import annotations

from pathlib import Path

import pytest

from squall.errors import ConfigError
from squall.worker.membership import MAX_LEN, check_template, group_instance_id

IDS = [
    ("", "vm", "/srv/w1", None),
    ("{hostname}", "crawler-3", "/srv/w1", "crawler-3"),
    ("{hostname}-{datadir}", "vm", "/srv/crawl/w1", "vm-_srv_crawl_w1"),
    ("squall-{datadir}", "vm", "/tmp/a b/ü", "squall-_tmp_a_b__"),
    ("fixed", "vm", "/x", "fixed"),
]


@pytest.mark.parametrize(("template", "hostname", "datadir", "expected"), IDS)
def test_the_template_gives_a_kafka_legal_instance_id(template, hostname, datadir, expected):
    assert group_instance_id(template, hostname, Path(datadir)) == expected


def test_two_directories_on_one_machine_give_two_ids():
    a = group_instance_id("{hostname}-{datadir}", "vm", Path("/srv/w1"))
    b = group_instance_id("{hostname}-{datadir}", "vm", Path("/srv/w2"))
    assert a != b


def test_a_very_long_id_is_cut_to_kafkas_limit_and_stays_unique():
    a = group_instance_id("{datadir}", "vm", Path("/" + "x" * 300 + "/w1"))
    b = group_instance_id("{datadir}", "vm", Path("/" + "y" + "x" * 299 + "/w1"))
    assert len(a) <= MAX_LEN and len(b) <= MAX_LEN and a != b


@pytest.mark.parametrize("template", ["{worker}", "{hostname", "{0}"])
def test_an_unknown_or_broken_field_names_the_key(template):
    with pytest.raises(ConfigError, match="kafka.group.instance.id"):
        check_template(template)
