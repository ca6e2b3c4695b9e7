"""The ``squall`` command line: ``squall <command> ...``.

Each command lives in the module that owns its concept and registers itself
through an ``add_parser(subparsers)`` function that sets ``func`` (a callable
taking the parsed ``argparse.Namespace`` and returning an exit code).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from squall.errors import SquallError

# (module, attribute) pairs: each module's add_parser registers its command(s).
COMMAND_MODULES = (
    "squall.kafka_local",   # squall kafka up|down|status
    "squall.seeding",       # squall seed FILE|-
    "squall.status_report", # squall status [--json] [--wait-idle] [--watch]
    "squall.audit_report",  # squall audit [--json]
    "squall.dashboard",     # squall dashboard [--port N]
    "squall.tail",          # squall tail TOPIC
    "squall.urls",          # squall url normalize URL...
    "squall.robots_policy", # squall robots check --robots FILE --agent NAME URL...
    "squall.sitemap_check", # squall sitemap check URL|FILE
)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(prog="squall", description="squall: a polite, distributed web crawler")
    parser.add_argument("--conf", help="configuration file (default: $SQUALL_CONF, else config/crawler-conf.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SquallError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
