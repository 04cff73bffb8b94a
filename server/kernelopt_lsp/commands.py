"""Server commands (``workspace/executeCommand``): one way to register them and to fail them.

A command that cannot do what was asked raises :class:`CommandError`; the message is logged,
shown to clients that do not turn ``kernelopt/jobStatus`` into their own messages, and sent back
as the request's error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .client import EditorClient

Command = Callable[[Any], Awaitable[Any]]


class CommandError(Exception):
    """A server command could not do what was asked; the message says why (sent to the client)."""


def register_command(server: LanguageServer, client: EditorClient, command_id: str, command: Command) -> None:
    """Register ``command(argument)``: it gets the first argument of the request (``{}`` when none)."""

    # pygls hands a command the server first (``ls``); the command itself needs only its argument.
    async def handler(ls: LanguageServer, *arguments: Any) -> Any:
        argument = arguments[0] if arguments else {}
        try:
            return await command(argument)
        except CommandError as exc:
            client.log(f"{command_id}: {exc}", types.MessageType.Warning)
            if not client.shows_job_status():
                client.message(str(exc), types.MessageType.Warning)
            raise

    handler.__name__ = command_id.rsplit(".", 1)[-1]
    server.command(command_id)(handler)
