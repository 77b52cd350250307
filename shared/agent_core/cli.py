"""``soong-agent``: the command line.

soong-agent up [--workers N] [--fake-provider] [--new-dev-key]   the whole stack, one per home
soong-agent serve NAME [--instance ID]            one service process
soong-agent asyncapi                              print the bus's AsyncAPI document
soong-agent keys create --account NAME [--expires-in 30d] | list [--account NAME] | revoke KEY_ID
soong-agent assistants list | show NAME | create --file F | update NAME --file F | delete NAME
soong-agent chat | memory replay | compose-check FILE

The library knows no service: every command but ``asyncapi`` comes from a module registered under
the ``soong_agent.commands`` entry points (``pyproject.toml``; the services' own commands live in
the composition root, :mod:`services.stack.commands`). Such a module has ``add_parser(subparsers)``
and ``run(args) -> int`` for the commands it adds.

Every expected failure prints one line (``error: ... [code]``) and exits non-zero; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import NoReturn

__all__ = ["COMMAND_GROUP", "build_parser", "main"]

COMMAND_GROUP = "soong_agent.commands"

# A configuration error exits 2 unless the command says otherwise (``serve`` uses EX_CONFIG).
_CONFIG_ERROR_EXIT = 2


class _Parser(argparse.ArgumentParser):
    """A usage error in the one-line form of every other failure (``error: … [usage]``),
    naming the ``--help`` that shows the usage; subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see `{self.prog} --help`) [usage]\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered command (also read by the compose check)."""
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The parser and, per command name, the module that carries it out."""
    parser = _Parser(prog="soong-agent", description="soong-agent runtime")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("asyncapi", help="print the AsyncAPI document of the bus")
    owners: dict[str, ModuleType] = {}
    for point in sorted(entry_points(group=COMMAND_GROUP), key=lambda p: p.name):
        module = importlib.import_module(point.value)
        before = set(sub.choices)
        module.add_parser(sub)
        owners.update(dict.fromkeys(set(sub.choices) - before, module))
    return parser, owners


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code. Errors print one line, never a traceback.

    Building the parser imports every command module, so those import nothing heavy (each loads
    its own code in ``run``); with the error types imported only after parsing, ``--help`` and
    a mistyped command cost no more than Python's start-up.
    """
    parser, owners = _build()
    args = parser.parse_args(argv)
    from agent_core.errors import AgentCoreError, ConfigError

    try:
        if args.command == "asyncapi":
            from agent_core.bus.asyncapi import asyncapi_document

            sys.stdout.write(asyncapi_document())
            return 0
        return int(owners[args.command].run(args))
    except AgentCoreError as exc:
        print(f"error: {exc.to_payload().message} [{exc.code}]", file=sys.stderr)
        if isinstance(exc, ConfigError):
            return int(getattr(args, "config_error_exit", _CONFIG_ERROR_EXIT))
        return 2
    except OSError as exc:  # a folder not writable, a file not readable: the system says why
        print(f"error: {exc.strerror or exc}: {exc.filename or ''} [os_error]", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
