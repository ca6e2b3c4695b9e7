"""The ``squall`` command line: ``squall <command> ...``.

Each command lives in the module that owns its concept and registers itself
through an ``add_parser(subparsers)`` function that sets ``func`` (a callable
taking the parsed ``argparse.Namespace`` and returning an exit code).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from squall.errors import SquallError

# (module, attribute) pairs: each module's add_parser registers its command(s).
COMMAND_MODULES = (
    "squall.cli.kafka",  # squall kafka up|down|status
    "squall.cli.seed",  # squall seed FILE|-
    "squall.cli.status",  # squall status [--json] [--wait-idle] [--watch]
    "squall.cli.audit",  # squall audit [--json]
    "squall.cli.dashboard",  # squall dashboard [--port N]
    "squall.cli.tail",  # squall tail TOPIC
    "squall.cli.url",  # squall url normalize URL...
    "squall.cli.robots",  # squall robots check --robots FILE --agent NAME URL...
    "squall.cli.sitemap",  # squall sitemap check URL|FILE
    "squall.cli.index",  # squall index [--until-idle SECS], squall search QUERY
    "squall.cli.control",  # squall host delay|block|unblock|limit|delete ..., squall crawl pause|resume|delay
    "squall.cli.frontier",  # squall hosts, squall urls --host H, squall frontier dump
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
    # the commands configure no logging: aiokafka's own connection errors would reach Python's last-resort
    # handler and print before the one line the command ends with (its errors are translated into ours)
    logging.getLogger("aiokafka").addHandler(logging.NullHandler())
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SquallError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `squall status --json | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit-time flush must not fail again
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
