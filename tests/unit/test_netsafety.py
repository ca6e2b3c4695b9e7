"""Address judgement and policy parsing of squall.policy.netsafety (pure: nothing is resolved or connected)."""

from __future__ import annotations

import ipaddress

import pytest

from squall.errors import ConfigError
from squall.policy.netsafety import NetworkPolicy, check_address
from squall.policy.reasons import Reason
from tests.unit.settings_helper import from_settings

BLOCKED = Reason.FETCH_BLOCKED_ADDRESS
NO_ALLOW = NetworkPolicy()
LOOPBACK_ALLOWED = NetworkPolicy(allow=(ipaddress.ip_network("127.0.0.0/8"),))
TEN_ALLOWED = NetworkPolicy(allow=(ipaddress.ip_network("10.1.0.0/16"), ipaddress.ip_network("fd00:1::/32")))

# (address, policy, expected judgement, why)
ADDRESS_TABLE = [
    # public addresses pass
    ("93.184.216.34", NO_ALLOW, None, "public IPv4"),
    ("8.8.8.8", NO_ALLOW, None, "public IPv4"),
    ("2606:4700:4700::1111", NO_ALLOW, None, "public IPv6"),
    ("[2606:4700:4700::1111]", NO_ALLOW, None, "public IPv6 in brackets"),
    # IPv4 special ranges
    ("127.0.0.1", NO_ALLOW, BLOCKED, "loopback"),
    ("127.255.255.254", NO_ALLOW, BLOCKED, "loopback, end of 127/8"),
    ("10.0.0.1", NO_ALLOW, BLOCKED, "RFC 1918 10/8"),
    ("172.16.5.4", NO_ALLOW, BLOCKED, "RFC 1918 172.16/12"),
    ("192.168.1.1", NO_ALLOW, BLOCKED, "RFC 1918 192.168/16"),
    ("169.254.169.254", NO_ALLOW, BLOCKED, "link-local cloud metadata"),
    ("169.254.0.1", NO_ALLOW, BLOCKED, "link-local"),
    ("224.0.0.1", NO_ALLOW, BLOCKED, "multicast (is_global in ipaddress)"),
    ("239.255.255.250", NO_ALLOW, BLOCKED, "multicast SSDP"),
    ("240.0.0.1", NO_ALLOW, BLOCKED, "reserved 240/4"),
    ("255.255.255.255", NO_ALLOW, BLOCKED, "limited broadcast"),
    ("0.0.0.0", NO_ALLOW, BLOCKED, "unspecified"),
    ("0.1.2.3", NO_ALLOW, BLOCKED, "this network 0/8"),
    ("100.64.0.1", NO_ALLOW, BLOCKED, "shared address space 100.64/10"),
    ("100.127.255.254", NO_ALLOW, BLOCKED, "shared address space, end"),
    ("100.128.0.1", NO_ALLOW, None, "just past the shared address space"),
    ("192.0.2.10", NO_ALLOW, BLOCKED, "documentation TEST-NET-1"),
    ("198.18.0.1", NO_ALLOW, BLOCKED, "benchmarking 198.18/15"),
    # IPv6 special ranges
    ("::1", NO_ALLOW, BLOCKED, "IPv6 loopback"),
    ("::", NO_ALLOW, BLOCKED, "IPv6 unspecified"),
    ("fe80::1", NO_ALLOW, BLOCKED, "IPv6 link-local"),
    ("fe80::1%eth0", NO_ALLOW, BLOCKED, "IPv6 link-local with a zone"),
    ("fc00::1", NO_ALLOW, BLOCKED, "IPv6 unique-local fc00::/7"),
    ("fd12:3456:789a::1", NO_ALLOW, BLOCKED, "IPv6 unique-local fd00::/8"),
    ("fec0::1", NO_ALLOW, BLOCKED, "IPv6 site-local (deprecated)"),
    ("ff02::1", NO_ALLOW, BLOCKED, "IPv6 multicast"),
    ("2001:db8::1", NO_ALLOW, BLOCKED, "IPv6 documentation"),
    # IPv6 forms that carry an IPv4 address are judged by it
    ("::ffff:127.0.0.1", NO_ALLOW, BLOCKED, "IPv4-mapped loopback"),
    ("::ffff:7f00:1", NO_ALLOW, BLOCKED, "IPv4-mapped loopback, hex form"),
    ("::ffff:169.254.169.254", NO_ALLOW, BLOCKED, "IPv4-mapped metadata address"),
    ("::ffff:10.0.0.1", NO_ALLOW, BLOCKED, "IPv4-mapped private"),
    ("::ffff:8.8.8.8", NO_ALLOW, None, "IPv4-mapped public"),
    ("::127.0.0.1", NO_ALLOW, BLOCKED, "IPv4-compatible loopback"),
    ("::8.8.8.8", NO_ALLOW, None, "IPv4-compatible public"),
    ("64:ff9b::a00:1", NO_ALLOW, BLOCKED, "NAT64 of 10.0.0.1"),
    ("64:ff9b::808:808", NO_ALLOW, None, "NAT64 of 8.8.8.8"),
    ("2002:7f00:1::1", NO_ALLOW, BLOCKED, "6to4 embedding 127.0.0.1"),
    ("2002:a9fe:a9fe::1", NO_ALLOW, BLOCKED, "6to4 embedding 169.254.169.254"),
    ("2002:808:808::1", NO_ALLOW, None, "6to4 embedding 8.8.8.8"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", NO_ALLOW, BLOCKED, "Teredo (never public)"),
    # the allow list
    ("127.0.0.1", LOOPBACK_ALLOWED, None, "loopback allowed by 127.0.0.0/8"),
    ("127.0.0.2", LOOPBACK_ALLOWED, None, "another loopback address allowed"),
    ("::ffff:127.0.0.1", LOOPBACK_ALLOWED, None, "IPv4-mapped loopback judged as 127.0.0.1"),
    ("::1", LOOPBACK_ALLOWED, BLOCKED, "IPv6 loopback is not in 127.0.0.0/8"),
    ("10.0.0.1", LOOPBACK_ALLOWED, BLOCKED, "private address outside the allow list"),
    ("10.1.2.3", TEN_ALLOWED, None, "private address inside 10.1.0.0/16"),
    ("10.2.0.1", TEN_ALLOWED, BLOCKED, "private address outside 10.1.0.0/16"),
    ("fd00:1::5", TEN_ALLOWED, None, "unique-local address inside fd00:1::/32"),
    ("8.8.8.8", TEN_ALLOWED, None, "public addresses stay allowed"),
    # not an address at all
    ("example.com", NO_ALLOW, BLOCKED, "a name is not an address"),
    ("", NO_ALLOW, BLOCKED, "empty text"),
    ("127.1", NO_ALLOW, BLOCKED, "legacy short IPv4 form is not parsed"),
    ("2130706433", NO_ALLOW, BLOCKED, "legacy integer IPv4 form is not parsed"),
]


@pytest.mark.parametrize("address, policy, expected, why", ADDRESS_TABLE, ids=[f"{row[0]} ({row[3]})" for row in ADDRESS_TABLE])
def test_an_address_is_judged_by_its_range_and_the_allow_list(address, policy, expected, why):
    assert check_address(address, policy) == expected, why


def settings(allow=(), resolve=()):
    return {"http.private.networks.allow": list(allow), "http.resolve": list(resolve)}


def test_a_policy_reads_allowed_networks_and_pins():
    policy = from_settings(NetworkPolicy, settings(
        allow=["127.0.0.0/8", "fd00::/8", "10.0.0.7"],
        resolve=["Site-A.test:8080:127.0.0.2", "v6.test:443:[::1]", "dot.test.:80:10.0.0.1"]))
    assert policy.allow == (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("fd00::/8"),
                            ipaddress.ip_network("10.0.0.7/32"))
    assert dict(policy.pins) == {("site-a.test", 8080): "127.0.0.2", ("v6.test", 443): "::1",
                                 ("dot.test", 80): "10.0.0.1"}
    assert policy.pinned("SITE-A.TEST.", 8080) == "127.0.0.2"
    assert policy.pinned("site-a.test", 8081) is None


def test_an_empty_configuration_allows_only_public_addresses():
    policy = from_settings(NetworkPolicy, settings())
    assert policy.allow == () and dict(policy.pins) == {}


BAD_CONFIG = [
    (settings(allow=["not-a-network"]), "http.private.networks.allow"),
    (settings(allow=["127.0.0.1/8"]), "http.private.networks.allow"),  # host bits set
    (settings(allow=["10.0.0.0/33"]), "http.private.networks.allow"),
    ({"http.private.networks.allow": "127.0.0.0/8", "http.resolve": []}, "http.private.networks.allow"),
    (settings(resolve=["site.test:80"]), "http.resolve"),
    (settings(resolve=["site.test:http:127.0.0.1"]), "http.resolve"),
    (settings(resolve=["site.test:0:127.0.0.1"]), "http.resolve"),
    (settings(resolve=["site.test:70000:127.0.0.1"]), "http.resolve"),
    (settings(resolve=["site.test:80:not-an-ip"]), "http.resolve"),
    (settings(resolve=["site.test:80:127.0.0.1,127.0.0.2"]), "http.resolve"),
    (settings(resolve=["site.test:80:[::1"]), "http.resolve"),
    (settings(resolve=[":80:127.0.0.1"]), "http.resolve"),
    (settings(resolve=["a.test:80:127.0.0.1", "A.test:80:127.0.0.2"]), "http.resolve"),
    ({"http.private.networks.allow": [], "http.resolve": [42]}, "http.resolve"),
]


@pytest.mark.parametrize("values, key", BAD_CONFIG)
def test_a_bad_entry_fails_with_the_key_named(values, key):
    with pytest.raises(ConfigError) as info:
        from_settings(NetworkPolicy, values)
    assert info.value.key == key
    assert str(info.value).startswith(key)


def test_the_policy_is_frozen():
    policy = from_settings(NetworkPolicy, settings(resolve=["a.test:80:127.0.0.1"]))
    with pytest.raises(AttributeError):
        policy.allow = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        policy.pins[("b.test", 80)] = "127.0.0.1"  # type: ignore[index]
