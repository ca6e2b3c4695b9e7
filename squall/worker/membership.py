"""Kafka static group membership (KIP-345): a worker's ``group.instance.id`` from a template.

A static member that is killed and restarts within ``kafka.session.timeout.secs``
rejoins with the same instance id and gets its partitions back *without* a
rebalance, so the other workers' hosts never stop. aiokafka >= 0.8 sends
``group_instance_id`` (JoinGroup v5+) and faust-streaming passes its
``consumer_group_instance_id`` setting through, so squall only has to give
every worker a stable, unique id.

The template is ``kafka.group.instance.id``: ``""`` keeps dynamic membership
(Faust's default). ``{hostname}`` is the machine's host name and
``{datadir}`` the worker's absolute table directory — unique on a machine,
because the directory is locked by one worker (:mod:`squall.worker.datadir`), and
stable across restarts. Characters Kafka does not allow in an id (anything
but ``[a-zA-Z0-9._-]``) become ``_``; an id over 249 characters keeps its
end and a hash of the whole.

Trade-off (Kafka's, not squall's): a static member does not leave the group
on a clean shutdown, so the partitions of a worker stopped for good wait
``kafka.session.timeout.secs`` before moving to the others.
"""

from __future__ import annotations

import hashlib
import re
import string
from pathlib import Path

from squall.errors import ConfigError

KEY = "kafka.group.instance.id"
FIELDS = ("hostname", "datadir")
MAX_LEN = 249  # Kafka's limit for topic names and group instance ids
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9._-]")


def check_template(template: str) -> None:
    """Raise :class:`ConfigError` (naming the key) if ``template`` uses another field than {hostname}/{datadir}."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ConfigError(KEY, f"not a valid template: {exc}") from None
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        raise ConfigError(KEY, f"unknown field {{{unknown[0]}}}; use {{hostname}} and {{datadir}}")


def group_instance_id(template: str, hostname: str, datadir: Path) -> str | None:
    """The worker's ``group.instance.id``, or ``None`` for dynamic membership (empty template)."""
    if not template:
        return None
    check_template(template)
    raw = template.format(hostname=hostname, datadir=str(datadir))
    clean = _NOT_ALLOWED.sub("_", raw)
    if len(clean) > MAX_LEN:
        digest = hashlib.sha1(raw.encode()).hexdigest()[:12]
        clean = f"{digest}-{clean[-(MAX_LEN - 13) :]}"
    return clean
