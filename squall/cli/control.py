"""``squall host ...`` and ``squall crawl ...``: operator commands on the control topic.

``squall host delay HOST SECONDS|default``, ``squall host block HOST (--until T | --for D) [--reason TEXT]``,
``squall host unblock HOST``, ``squall host limit HOST N|none``, ``squall host delete HOST [--yes]``
(asks for confirmation unless ``--yes``), ``squall crawl pause``,
``squall crawl resume``, ``squall crawl delay SECONDS|default``. Each builds one
:class:`squall.policy.control.Command` (the JSON format is documented there and in
docs/operator-commands.md), validates it before anything is sent — a malformed host name,
duration, time or number is one line on standard error and exit code 2 — and sends it to
``<topology.id>-control``: a host command keyed by the host's partition key (Kafka's default
murmur2 partitioner, so it reaches the host's owner), a crawl-wide one to every partition.
A host need not have been seen yet: it can be slowed or blocked ahead of time.
``--by NAME`` names the operator in the operator log (default: the OS user and machine, ``user@host``).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import socket
import sys
import time

from squall.errors import MessageError
from squall.policy.control import CRAWL_KEY, Command, Op, check_host, parse_duration, parse_time


def default_by() -> str:
    """``user@machine`` of this process (the operator log's name when ``--by`` is not given)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def build_command(args: argparse.Namespace, now_s: float) -> Command:
    """The command the parsed ``args`` ask for, validated.

    Raises:
        MessageError: a malformed host name, duration, time or number (the message says which).
    """
    by = args.by or default_by()
    group, action = args.command, args.action
    if group == "crawl":
        op = Op(f"crawl.{action}")
        delay_s = _delay(args.seconds) if op is Op.CRAWL_DELAY else None
        cmd = Command(op=op, by=by, at_s=now_s, delay_s=delay_s)
    else:
        host = check_host(args.host)
        op = Op(f"host.{action}")
        if op is Op.HOST_DELAY:
            cmd = Command(op=op, by=by, at_s=now_s, host=host, delay_s=_delay(args.seconds))
        elif op is Op.HOST_BLOCK:
            until_s = parse_time(args.until) if args.until is not None else now_s + parse_duration(args.for_)
            cmd = Command(op=op, by=by, at_s=now_s, host=host, until_s=until_s, reason=args.reason)
        elif op is Op.HOST_LIMIT:
            cmd = Command(op=op, by=by, at_s=now_s, host=host, pages=_pages(args.pages))
        else:
            cmd = Command(op=op, by=by, at_s=now_s, host=host)
    return Command.from_bytes(cmd.to_bytes())  # the worker's own check, before anything is sent


def _delay(text: str) -> float | None:
    return None if text.strip().lower() in ("default", "none") else parse_duration(text)


def _pages(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    if not text.strip().isdigit():
        raise MessageError(f"not a page count: {text!r} (an integer >= 0, or none)")
    return int(text)


async def send_command(settings, cmd: Command) -> int:
    """Send ``cmd`` to the control topic (created if missing); returns the number of messages sent."""
    from aiokafka import AIOKafkaProducer

    from squall.net.kafka_security import KafkaConnection, refusals
    from squall.policy.partition import partition_key
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import ensure_topics

    conn = KafkaConnection.from_settings(settings)
    topic = topic_name(settings, "control")
    n = settings.topology_partitions
    async with refusals(conn):
        await ensure_topics(conn, {topic: n}, settings.topology_replication_factor)
    producer = AIOKafkaProducer(**conn.client_kwargs(), acks="all")
    async with refusals(conn):  # an ACL that does not let this user write the control topic: one line
        await producer.start()
    try:
        value = cmd.to_bytes()
        async with refusals(conn):
            if cmd.host is None:
                sent = [await producer.send(topic, key=CRAWL_KEY.encode(), value=value, partition=p) for p in range(n)]
            else:
                key = partition_key(f"http://{cmd.host}/", settings.partition_url_mode)
                sent = [await producer.send(topic, key=key.encode(), value=value)]
            await producer.flush()
            for future in sent:
                await future
    finally:
        await producer.stop()
    return len(sent)


def _run(args: argparse.Namespace) -> int:
    from squall.settings import load_settings

    try:
        cmd = build_command(args, time.time())
    except MessageError as exc:
        print(f"squall {args.command} {args.action}: {exc} (nothing sent)", file=sys.stderr)
        return 2
    settings = load_settings(args.conf)
    if cmd.op is Op.HOST_DELETE and not getattr(args, "yes", False) and not _confirmed(cmd, settings.topology_id):
        print("squall host delete: not confirmed (nothing sent; --yes skips the question)", file=sys.stderr)
        return 2
    sent = asyncio.run(send_command(settings, cmd))
    what = cmd.host if cmd.host is not None else f"all {sent} partitions"
    print(f"squall: {cmd.op.value} {what} {cmd.args() or ''} sent to {settings.topology_id}-control as {cmd.by}")
    return 0


def _confirmed(cmd: Command, topology_id: str) -> bool:
    """Ask on the terminal whether to delete ``cmd.host``'s URLs; False without a terminal."""
    if not sys.stdin.isatty():
        return False
    answer = input(f"Delete every URL and the queue of {cmd.host} from crawl {topology_id}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def add_parser(subparsers) -> None:
    by = argparse.ArgumentParser(add_help=False)
    by.add_argument("--by", help="who sends the command, for the operator log (default: user@machine)")

    host = subparsers.add_parser("host", help="steer one host of a running crawl (control topic)")
    host_sub = host.add_subparsers(dest="action", required=True)
    p = host_sub.add_parser("delay", parents=[by], help="set the host's delay between requests")
    p.add_argument("host")
    p.add_argument("seconds", help="delay (90, 2.5s, 1m), or 'default' for fetcher.server.delay")
    p = host_sub.add_parser("block", parents=[by], help="start no request to the host until a time")
    p.add_argument("host")
    until = p.add_mutually_exclusive_group(required=True)
    until.add_argument("--until", help="end of the block: ISO 8601 (UTC unless an offset is given) or Unix seconds")
    until.add_argument("--for", dest="for_", help="length of the block (20s, 2h, 1d)")
    p.add_argument("--reason", help="why (kept in the operator log and shown by squall status)")
    p = host_sub.add_parser("unblock", parents=[by], help="end the host's block")
    p.add_argument("host")
    p = host_sub.add_parser("limit", parents=[by], help="fetch at most N pages of the host (the rest stay queued)")
    p.add_argument("host")
    p.add_argument("pages", help="most pages fetched (an integer), or 'none' for no limit")
    p = host_sub.add_parser("delete", parents=[by], help="drop every URL and the queue of the host")
    p.add_argument("host")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    host.set_defaults(func=_run)

    crawl = subparsers.add_parser("crawl", help="pause, resume or slow the whole crawl (control topic)")
    crawl_sub = crawl.add_subparsers(dest="action", required=True)
    crawl_sub.add_parser("pause", parents=[by], help="start nothing new anywhere (fetches in flight finish)")
    crawl_sub.add_parser("resume", parents=[by], help="go on after a pause")
    p = crawl_sub.add_parser("delay", parents=[by], help="set the default delay of every host without its own")
    p.add_argument("seconds", help="delay (1, 2.5s), or 'default' for fetcher.server.delay")
    crawl.set_defaults(func=_run)
