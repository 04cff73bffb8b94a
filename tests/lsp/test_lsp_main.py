"""The ``kernelopt-lsp`` entry point: --version, --tcp HOST:PORT, and a bad address."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from kernelopt_lsp import __version__
from kernelopt_lsp.main import parse_address


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_message(sock: socket.socket) -> dict:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    header, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in header.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(4096)
    return json.loads(body[:length])


def test_version_and_bad_address():
    out = subprocess.run([sys.executable, "-m", "kernelopt_lsp.main", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"kernelopt-lsp {__version__}"
    bad = subprocess.run([sys.executable, "-m", "kernelopt_lsp.main", "--tcp", "localhost"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--tcp wants HOST:PORT" in bad.stderr
    assert parse_address(":2087") == ("127.0.0.1", 2087)


def test_tcp_server_answers_initialize(tmp_path):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "kernelopt_lsp.main", "--tcp", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert time.monotonic() < deadline, "the TCP server never listened"
                time.sleep(0.1)
        with sock:
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            answer = _read_message(sock)
        assert answer["id"] == 1
        capabilities = answer["result"]["capabilities"]
        assert capabilities["hoverProvider"] and capabilities["codeLensProvider"] is not None
        assert "kernelopt.server.optimize" in capabilities["executeCommandProvider"]["commands"]
        assert answer["result"]["serverInfo"] == {"name": "kernelopt-lsp", "version": __version__}
    finally:
        server.kill()
        server.wait(timeout=10)
