"""The loopback test server (tests/loopback.py): loopback only, one script a connection in order,
requests recorded whole, and a close that ends a held connection."""

from __future__ import annotations

import socket
import threading

from loopback import LoopbackServer, answer, hold, unused_port

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def _exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        try:
            while data := sock.recv(65536):
                received += data
        except ConnectionResetError:  # closed before the request was read: the kernel resets
            pass
        return received


def test_each_connection_follows_its_script_in_order_and_requests_are_kept_whole() -> None:
    with LoopbackServer([answer(None), answer(OK)]) as server:
        assert server.listener.getsockname()[0] == "127.0.0.1"
        assert _exchange(server.port, b"GET /a HTTP/1.1\r\n\r\n") == b""  # closed without an answer
        assert _exchange(server.port, b"POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz") == OK
        assert _exchange(server.port, b"GET /c HTTP/1.1\r\n\r\n") == b""  # past the scripts: closed
        assert server.requests == [b"GET /a HTTP/1.1\r\n\r\n", b"POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz"]
        assert server.connections == 3


def test_keep_alive_answers_every_request_on_one_connection() -> None:
    with LoopbackServer(answer(OK, keep_alive=True)) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n")
            assert server.wait_for_requests(2)
            received = b""
            while len(received) < 2 * len(OK):
                received += sock.recv(65536)
        assert received == OK + OK and server.connections == 1


def test_close_ends_a_held_connection() -> None:
    server = LoopbackServer(hold)
    received: list[bytes] = []
    client = threading.Thread(target=lambda: received.append(_exchange(server.port, b"GET / HTTP/1.1\r\n\r\n")))
    client.start()
    assert server.wait_for_requests(1)
    server.close()
    client.join(timeout=10)
    assert received == [b""] and not client.is_alive()


def test_an_unused_port_refuses() -> None:
    port = unused_port()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
