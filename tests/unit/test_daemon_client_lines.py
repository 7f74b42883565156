"""The client's own line reader over a bare socket (it replaced `socket.makefile`, for CLI start-up time): lines
cut anywhere by the stream come back whole, in order; the end of the stream and an oversized line are reported."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import eukhe.daemon.client as client_module
from eukhe.daemon.client import DaemonClient, DaemonProtocolError


@pytest.fixture
def pair() -> Iterator[tuple[DaemonClient, socket.socket]]:
    """A client on one end of a real Unix socket pair, and the other end (the 'daemon')."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = DaemonClient(ours, "socketpair")
    try:
        yield client, theirs
    finally:
        client.close()
        theirs.close()


def send_in_pieces(sock: socket.socket, data: bytes, cuts: list[int]) -> None:
    """Send `data` cut at `cuts`, then close the sending side."""
    start = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        if start < cut <= len(data):
            sock.sendall(data[start:cut])
            start = cut
    sock.shutdown(socket.SHUT_WR)


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    tail=st.binary(max_size=10).map(lambda b: b.replace(b"\n", b"")),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_lines_come_back_whole_however_the_stream_cuts_them(lines: list[bytes], tail: bytes, cuts: list[int]) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with DaemonClient(ours, "socketpair") as client, theirs:
        data = b"".join(line + b"\n" for line in lines) + tail
        sender = threading.Thread(target=send_in_pieces, args=(theirs, data, cuts))
        sender.start()
        read = [client.read_line() for _ in lines]
        end = client.read_line()
        sender.join(timeout=10)
    assert read == [line + b"\n" for line in lines]
    assert end == tail  # the end of the stream: what is left, b"" when nothing is


def test_replies_and_events_in_one_chunk(pair: tuple[DaemonClient, socket.socket]) -> None:
    client, daemon = pair
    daemon.sendall(
        b'{"v":1,"id":1,"event":{"n":1}}\n{"v":1,"id":1,"event":{"n":2}}\n{"v":1,"id":1,"ok":true,"result":7}\n'
    )
    events: list[object] = []
    assert client.call("watch", on_event=events.append) == 7
    assert events == [{"n": 1}, {"n": 2}]


def test_a_closed_connection_and_a_torn_reply_are_protocol_errors(pair: tuple[DaemonClient, socket.socket]) -> None:
    client, daemon = pair
    daemon.sendall(b'{"v":1,"id":1,"ok":tr')
    daemon.shutdown(socket.SHUT_WR)
    with pytest.raises(DaemonProtocolError, match="unreadable reply"):
        client.read_reply()
    with pytest.raises(DaemonProtocolError, match="closed the connection"):
        client.read_reply()


def test_an_oversized_reply_line_is_a_protocol_error(
    pair: tuple[DaemonClient, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, daemon = pair
    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 1000)
    monkeypatch.setattr(client_module, "RECV_BYTES", 300)
    daemon.sendall(b"x" * 1000 + b"\n")
    assert client.read_line() == b"x" * 1000 + b"\n"  # exactly the limit: read
    daemon.sendall(b"y" * 2000 + b"\n")
    with pytest.raises(DaemonProtocolError, match="longer than 1000 bytes"):
        client.read_line()


def test_an_oversized_line_read_whole_in_one_chunk_is_a_protocol_error(
    pair: tuple[DaemonClient, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, daemon = pair
    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 1000)
    daemon.sendall(b"z" * 1001 + b"\n")
    with pytest.raises(DaemonProtocolError, match="longer than 1000 bytes"):
        client.read_line()


def test_a_daemon_that_went_away_is_a_typed_error_not_a_broken_pipe(tmp_path: Path) -> None:
    """A daemon killed between the connect and the request (found by the soak: `eukhe bash` printed a
    BrokenPipeError traceback) is `daemon_protocol`: it closed the connection."""
    path = tmp_path / "d.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    client = DaemonClient.connect(path)
    accepted, _ = listener.accept()
    accepted.close()
    listener.close()
    with client:
        for _ in range(3):  # the first send may still be taken into the buffer; then the pipe is broken or reset
            with pytest.raises(DaemonProtocolError, match="closed the connection"):
                client.call("ping", {})


def test_a_ctrl_c_that_comes_while_the_request_goes_out_cancels_that_request() -> None:
    """SIGINT right after the request is sent, before the wait for its answer: the client still sends the cancel
    and waits for the answer (not: leave at once with the request running)."""
    import json
    import os
    import signal
    import socket

    from eukhe.daemon.client import DaemonClient

    ours, theirs = socket.socketpair()
    client = DaemonClient(ours, "test")
    sent = client._send

    def send_then_ctrl_c(data: bytes) -> None:
        sent(data)
        if b'"op":"bash"' in data.replace(b" ", b""):
            os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, the moment the request is out

    client._send = send_then_ctrl_c  # type: ignore[method-assign]
    heard: list[bool] = []
    previous = signal.getsignal(signal.SIGINT)
    try:
        reader = theirs.makefile("rb")
        import threading

        def daemon() -> None:
            request = json.loads(reader.readline())
            cancel = json.loads(reader.readline())
            assert cancel["op"] == "cancel"
            assert cancel["args"] == {"request": request["id"]}
            reply = {"v": 1, "id": request["id"], "ok": True, "result": {"status": "settled"}}
            theirs.sendall(json.dumps(reply).encode() + b"\n")

        thread = threading.Thread(target=daemon)
        thread.start()
        try:
            answer = client.call("bash", {"session": "s", "command": "sleep 60"}, on_interrupt=heard.append)
        except KeyboardInterrupt:
            theirs.sendall(b'{"v": 1, "id": "cancel-1", "ok": true, "result": {}}\n')  # let the daemon end
            pytest.fail("the Ctrl-C left at once, with the request still running in the daemon")
        finally:
            ours.shutdown(socket.SHUT_WR)
            thread.join(timeout=30)
        assert heard == [True]
        assert answer == {"status": "settled"}
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        reader.close()
        ours.close()
        theirs.close()
