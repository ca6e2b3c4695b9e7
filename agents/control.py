"""Control agent: operator commands (control topic) → hosts and control tables, and the fetcher's gate.

Each command (:mod:`squall.policy.control`) is applied inside an event of
its partition, so the table writes go to that partition's changelogs and
follow the host to its next owner (docs/architecture.md invariant 1). A host
command changes the host's record (delay, block, page limit, operator log)
and, at once, the fetcher's pace of the queue and the due index; a
crawl-wide one (sent to every partition) changes the partition's
:class:`squall.policy.control.CrawlControl`. A malformed command, or one
on a partition its host does not hash to, goes to the dead-letter topic
with its reason; the stream goes on.

After every rebalance (restart included) the crawl-wide state of the owned
partitions is read back from the control table into the fetcher.
"""

from __future__ import annotations

import logging
import time

from agents.common import config, deadletter, delete_url, fetch_runtime, load_host, save_host, tables
from agents.worker_state import owned_partitions, state
from squall.errors import InvalidURL, MessageError
from squall.policy.control import Command, CrawlControl, Op, apply_to_crawl, apply_to_host, crawl_key
from squall.policy.due_index import DueIndex
from squall.policy.handout import eligible_at_s
from squall.policy.partition import partition_for_key, partition_key
from squall.worker import fetch_control
from topology import app, control_table, control_topic

log = logging.getLogger("squall.control")


@app.agent(control_topic)
async def control(stream):
    async for event in stream.events():
        try:
            cmd = Command.from_bytes(event.value)
            apply(cmd, event.message.partition, time.time())
        except (MessageError, InvalidURL, ValueError, TypeError, KeyError) as exc:  # bad input, or a stored record
            await deadletter(event.value, exc)  # of another shape: never a dead agent


def apply(cmd: Command, partition: int, now_s: float) -> None:
    """Apply ``cmd`` received on ``partition`` (inside that partition's event).

    Raises:
        MessageError: a host command on a partition its host's key does not hash to.
    """
    if cmd.op.crawl_wide:
        crawl = apply_to_crawl(load_crawl(partition), cmd)
        control_table[crawl_key(partition).encode()] = crawl.to_dict()
        fetch_control.set_crawl(fetch_runtime(), partition, crawl, now_s)
        log.warning("squall: operator command %s by %s applied (partition %d)", cmd.op.value, cmd.by, partition)
        return
    assert cmd.host is not None  # from_bytes checks it
    key = partition_key(f"http://{cmd.host}/", config().mode)
    owner = partition_for_key(key, config().partitions)
    if owner != partition:
        raise MessageError(f"{cmd.op.value} of {cmd.host} (key {key}) sent to partition {partition}, not {owner}")
    host = apply_to_host(load_host(key), cmd)
    save_host(host)
    index = state().index_for_key(key)
    if cmd.op is Op.HOST_DELETE:
        _drop_urls(key, index)
    fetch_control.steer(fetch_runtime(), key, host, now_s)
    if index is not None:
        index.set_host_ready(key, eligible_at_s(host, now_s, config().handout))
    log.warning("squall: operator command %s %s %s by %s applied", cmd.op.value, key, cmd.args(), cmd.by)


def _drop_urls(key: str, index: DueIndex | None) -> None:
    """``host.delete``: every URL record of queue ``key`` deleted (a tombstone each) and taken out of the due index.

    Hand-outs waiting at the fetcher are skipped as stale there (the host
    record no longer has them in flight); a fetch already started finishes
    and its result is recorded. O(URLs stored on this worker), once per command.
    """
    urls = [url.decode() for url, value in tables().urls.items() if isinstance(value, dict) and value.get("key") == key]
    for url in urls:
        delete_url(url)
        if index is not None:
            index.remove(url)
    log.warning("squall: host.delete %s: %d URL record(s) deleted", key, len(urls))


def load_crawl(partition: int) -> CrawlControl:
    """The crawl-wide operator state of ``partition`` (the default state when none was stored)."""
    return CrawlControl.from_dict(control_table.get(crawl_key(partition).encode()))


@app.on_rebalance_complete.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _read_crawl_state(sender, **kwargs) -> None:
    """The owned partitions' pause and default delay, from the recovered control table, into the fetcher."""
    now_s = time.time()
    runtime = fetch_runtime()
    for partition in owned_partitions():
        fetch_control.set_crawl(runtime, partition, load_crawl(partition), now_s)
