"""``soong-agent assistants``: the account's named agents from the command line, through the SDK.

::

    soong-agent assistants list [--all]
    soong-agent assistants show NAME [--version N]
    soong-agent assistants versions NAME
    soong-agent assistants create --file def.json        # {"name": …, "instructions": …, …}
    soong-agent assistants update NAME --file changes.json [--if-version N]
    soong-agent assistants delete NAME

Like ``chat``, it talks to a gateway (``--url`` / ``$SOONG_GATEWAY_URL``) with an API key
(``--key`` / ``$SOONG_API_KEY``): assistants belong to the key's account. Definitions are
JSON (the API's body); output is JSON. A refusal prints one ``error: … [code]`` line, exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from soong_agent._errors import APIError, SoongError
from soong_agent._sync import Client

__all__ = ["run"]

# A definition file is read whole: the API refuses bodies far smaller than this anyway.
_MAX_FILE_BYTES = 1 << 20


def _read(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        data = f.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        raise ValueError(f"{path} is larger than {_MAX_FILE_BYTES} bytes")
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return value


def _print(value: BaseModel) -> None:
    print(value.model_dump_json(indent=2, exclude_none=True))


def _dispatch(client: Client, args: argparse.Namespace) -> None:
    assistants = client.assistants
    match args.assistants_command:
        case "list":
            for a in assistants.list(include_archived=args.all).items:
                state = "" if a.status == "active" else f"  ({a.status})"
                print(f"{a.name}  v{a.version}  {a.assistant_id}  {a.description}{state}")
        case "show":
            _print(assistants.get(args.name, version=args.version))
        case "versions":
            _print(assistants.versions(args.name))
        case "create":
            _print(assistants.create(_read(args.file)))
        case "update":
            _print(assistants.update(args.name, _read(args.file), if_version=args.if_version))
        case "delete":
            assistants.archive(args.name)
            print(f"archived {args.name}")


def run(args: argparse.Namespace) -> int:
    """Run one ``assistants`` command; the exit code."""
    try:
        with Client(args.url, args.key, max_retries=2) as client:
            _dispatch(client, args)
    except APIError as exc:
        print(f"error: {exc.message} [{exc.code}]", file=sys.stderr)
        return 1
    except SoongError as exc:
        print(f"error: {exc} [transport]", file=sys.stderr)
        return 1
    except ValueError as exc:  # a key missing, a file that is not a JSON object or too large
        print(f"error: {str(exc).splitlines()[0]} [invalid_input]", file=sys.stderr)
        return 2
    return 0
