"""Entry point of ``kernelopt-lsp`` (also ``python -m kernelopt_lsp.main``): stdio by default,
``--tcp HOST:PORT`` on request."""

from __future__ import annotations

import argparse
import logging
import sys

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelopt-lsp", description="The KernelOPT language server.")
    parser.add_argument("--version", action="version", version=f"kernelopt-lsp {__version__}")
    parser.add_argument("--stdio", action="store_true", help="speak LSP on stdin/stdout (the default)")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio")
    parser.add_argument("--log-file", metavar="PATH", help="write the server's log here (default: stderr)")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="how much to log (default WARNING)")
    return parser


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--tcp wants HOST:PORT (e.g. 127.0.0.1:2087), got {text!r}")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    address = None
    if args.tcp:
        try:
            address = parse_address(args.tcp)
        except ValueError as exc:
            parser.error(str(exc))
    logging.basicConfig(
        filename=args.log_file, level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from .server import create_server  # after logging is set up; pygls is the slow import

    server = create_server()
    try:
        if address is not None:
            server.start_tcp(*address)
        else:
            server.start_io()
    finally:
        # The client went away without a shutdown: jobs run in their own sessions, end them too.
        server.runner.terminate_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
