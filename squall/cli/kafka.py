"""``squall kafka up|down|status``: the local single-node broker of :mod:`squall.tools.kafka_local`.

Also runnable as ``python -m squall.cli.kafka up|down|status`` (what
``scripts/test.sh`` uses): it imports no other command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import squall.settings
from squall.errors import SquallError
from squall.tools.kafka_local import _our_pid, _Paths, down, status, up
from squall.tools.kafka_probe import is_answering
from squall.tools.kafka_secure import MECHANISM, USERS


def _default_bootstrap(args: argparse.Namespace) -> str:
    if args.bootstrap:
        return args.bootstrap
    return str(squall.settings.load_settings(getattr(args, "conf", None))["kafka.bootstrap.servers"])


def _cmd_up(args: argparse.Namespace) -> int:
    bootstrap = _default_bootstrap(args)
    started_at = time.monotonic()
    topology_id = str(squall.settings.load_settings(getattr(args, "conf", None)).topology_id) if args.secure else ""
    started = up(
        bootstrap,
        args.data_dir,
        wait_s=args.wait,
        fresh=args.fresh,
        progress=print,
        secure=args.secure,
        topology_id=topology_id or "squall",
    )
    paths = _Paths(bootstrap, args.data_dir)
    if started:
        took = time.monotonic() - started_at
        print(f"kafka: started broker at {bootstrap} in {took:.1f} s (pid {_our_pid(paths)}, log: {paths.log})")
    else:
        print(f"kafka: already answering at {bootstrap} (nothing started)")
    if args.secure:
        _print_secure(paths, topology_id)
    return 0


def _print_secure(paths: _Paths, topology_id: str) -> None:
    """Where the secured broker's CA, credentials and client configurations are (never a password)."""
    files = paths.secure
    print(f"kafka: secured: SASL_SSL, {MECHANISM}; ACLs for topics and groups {topology_id}*; CA {files.ca}")
    for user in USERS:
        print(
            f"kafka: user {user}: credentials {files.credentials(user)}, client configuration {files.client_conf(user)}"
        )


def _cmd_down(args: argparse.Namespace) -> int:
    bootstrap = _default_bootstrap(args)
    if down(bootstrap, args.data_dir, wipe=args.wipe):
        print(f"kafka: stopped broker at {bootstrap}" + (" and deleted its data" if args.wipe else ""))
    else:
        answering = is_answering(bootstrap, timeout_s=2.0)
        extra = " (a broker answers there, but squall did not start it)" if answering else ""
        print(f"kafka: no broker started by squall is running at {bootstrap}{extra}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    bootstrap = _default_bootstrap(args)
    info = status(bootstrap, args.data_dir)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        who = f"started by squall, pid {info['pid']}" if info["pid"] else "not started by squall"
        state = "answering" if info["answering"] else "not answering"
        print(f"kafka: {bootstrap}: {state} ({who})")
        print(f"kafka: state dir {info['state_dir']} (log: {info['log']})")
        if info["secure"]:
            print(f"kafka: secured (SASL_SSL): CA, credentials and client configurations in {info['secure']}")
        print(f"kafka: jars {info['jars'] or 'not resolved yet'}")
    return 0 if info["answering"] else 1


def add_parser(subparsers: Any) -> None:
    """Register ``squall kafka up|down|status`` on ``subparsers``."""
    kafka = subparsers.add_parser(
        "kafka", help="run a local single-node Kafka broker (KRaft) for development and tests"
    )
    sub = kafka.add_subparsers(dest="kafka_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bootstrap", help="host:port of the broker (default: kafka.bootstrap.servers)")
        p.add_argument(
            "--data-dir",
            type=Path,
            default=None,
            help="state directory (default: $SQUALL_CACHE or ~/.cache/squall, then broker/<port>)",
        )

    p_up = sub.add_parser("up", help="start the broker unless one already answers (exit 0 either way)")
    common(p_up)
    p_up.add_argument("--wait", type=float, default=60.0, help="seconds to wait until it answers (default 60)")
    p_up.add_argument("--fresh", action="store_true", help="delete the broker's data first (empty cluster)")
    p_up.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL with SCRAM users worker, operator and viewer, and ACLs for topology.id (docs/security.md)",
    )
    p_up.set_defaults(func=_cmd_up)

    p_down = sub.add_parser("down", help="stop the broker that `squall kafka up` started")
    common(p_down)
    p_down.add_argument("--wipe", action="store_true", help="also delete its data and logs")
    p_down.set_defaults(func=_cmd_down)

    p_status = sub.add_parser("status", help="does a broker answer? (exit 0 if yes, 1 if not)")
    common(p_status)
    p_status.add_argument("--json", action="store_true", help="print a JSON object")
    p_status.set_defaults(func=_cmd_status)


def main(argv: list[str] | None = None) -> int:
    """``python -m squall.cli.kafka up|down|status ...`` (same as ``squall kafka ...``)."""
    parser = argparse.ArgumentParser(prog="python -m squall.cli.kafka")
    parser.add_argument("--conf", help="configuration file")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["kafka", *(argv if argv is not None else sys.argv[1:])])
    try:
        return int(args.func(args) or 0)
    except SquallError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
