"""registry/http11.py against crafted responses: each case is one a naive HTTP/1.1 parser gets wrong."""

from __future__ import annotations

import pytest

from ocivendir.registry.http11 import (
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    MAX_LINE,
    Disconnected,
    ProtocolError,
    RawResponse,
    Wire,
    read_response,
    request_bytes,
)
from tests.support.fakehttp import BytesSocket

OK = b"HTTP/1.1 200 OK\r\n"


def parse(data: bytes, method: str = "GET") -> RawResponse:
    return read_response(Wire(BytesSocket(data)), method)


def body(response: RawResponse, size: int = 7) -> bytes:
    """The whole body, read in small pieces so that every framing boundary is crossed."""
    chunks = []
    while chunk := response.read(size):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_content_length_body_is_read_exactly_and_what_follows_stays_on_the_wire() -> None:
    wire = Wire(BytesSocket(OK + b"Content-Length: 5\r\n\r\nhelloHTTP/1.1 204 No Content\r\n\r\n"))
    first = read_response(wire, "GET")
    assert (first.status, first.reason, body(first), first.isclosed(), first.will_close) == (
        200,
        "OK",
        b"hello",
        True,
        False,
    )
    second = read_response(wire, "GET")
    assert (second.status, second.reason, second.isclosed()) == (204, "No Content", True)


def test_a_chunked_body_is_joined_and_its_trailers_dropped() -> None:
    response = parse(
        OK + b"Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    assert (body(response, 4), response.isclosed(), response.will_close) == (b"hello world", True, False)
    assert "X-Trailer" not in response.headers


def test_without_length_or_chunks_the_body_runs_to_the_close() -> None:
    response = parse(OK + b"\r\neverything until EOF")
    assert (body(response), response.will_close) == (b"everything until EOF", True)


@pytest.mark.parametrize(
    ("method", "status_line"),
    [("HEAD", OK), ("GET", b"HTTP/1.1 204 No Content\r\n"), ("GET", b"HTTP/1.1 304 Not Modified\r\n")],
)
def test_head_204_and_304_have_no_body_whatever_their_content_length(method: str, status_line: bytes) -> None:
    response = parse(status_line + b"Content-Length: 100\r\n\r\n", method)
    assert (response.isclosed(), response.read(10)) == (True, b"")


def test_connection_close_and_http_1_0_are_not_reused() -> None:
    assert parse(OK + b"Connection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n").will_close
    assert parse(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").will_close
    assert not parse(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n").will_close


def test_informational_answers_are_skipped_up_to_five() -> None:
    five = b"HTTP/1.1 100 Continue\r\n\r\n" * 4 + b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
    assert body(parse(five + OK + b"Content-Length: 2\r\n\r\nok")) == b"ok"
    with pytest.raises(ProtocolError, match="more than 5 informational"):
        parse(b"HTTP/1.1 100 Continue\r\n\r\n" + five + OK + b"Content-Length: 0\r\n\r\n")


def test_an_empty_stream_is_a_disconnect_to_retry_on_a_new_connection() -> None:
    with pytest.raises(Disconnected):
        parse(b"")


@pytest.mark.parametrize(
    "status_line",
    [b"HTTP/1.1 200OK\r\n", b"HTTP/1.1 2000 OK\r\n", b"HTTP/1.1 20 OK\r\n", b"HTTP/2 200 OK\r\n", b"ICY 200 OK\r\n",
     b"HTTP/1.1 099 Low\r\n", b"HTTP/1.1 +20 OK\r\n", b"HTTP/1.1 200 OK\rX-Injected: 1\r\n", b"HTTP/1.1 200 O\x01K\r\n"],
)  # fmt: skip
def test_a_malformed_status_line_is_an_error(status_line: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(status_line + b"Content-Length: 0\r\n\r\n")


@pytest.mark.parametrize(
    "head",
    [b"X-A: a\rSet-Cookie: injected\r\n", b"X-A: a\x00b\r\n", b"X-A : a\r\n", b"X A: a\r\n", b"no colon\r\n",
     b": empty name\r\n", b" X-A: folded first\r\n", b"Content-Length: 2\r\n"],  # the last: the head never ends
)  # fmt: skip
def test_a_malformed_header_line_is_an_error_not_a_header(head: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(OK + head + (b"\r\n" if not head.startswith(b"Content-Length") else b""))


def test_an_obs_fold_continues_the_previous_field_with_one_space() -> None:
    response = parse(OK + b"X-A: one\r\n  two\r\n\tthree\r\nContent-Length: 0\r\n\r\n")
    assert response.headers.get_all("x-a") == ["one two three"]


@pytest.mark.parametrize(
    "head",
    [b"X: " + b"a" * MAX_LINE + b"\r\n", b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEADERS + 1)),
     b"".join(b"X-%d: %s\r\n" % (i, b"v" * (MAX_HEAD_BYTES // 50)) for i in range(60))],
)  # fmt: skip
def test_the_head_is_bounded_in_line_length_field_count_and_total_size(head: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(OK + head + b"Content-Length: 0\r\n\r\n")


@pytest.mark.parametrize("fold", [b"\t", b" x"])
@pytest.mark.parametrize("block", ["headers", "trailers"])
def test_folded_lines_count_toward_the_line_limit_as_in_http_client(fold: bytes, block: str) -> None:
    """Continuation lines are lines: a head of one field and endless folds (3 bytes each) is refused at line 101.

    Counted as bytes only, the 1 MiB head held a million folds, and joining each onto the growing value copied it
    again: ~10 s of CPU for 640,000 folds, quadratic, from one answer of 2 MB.
    """
    lines = b"X-A: v\r\n" + (fold + b"\r\n") * MAX_HEADERS
    if block == "headers":
        with pytest.raises(ProtocolError, match="more than 100 header lines"):
            parse(OK + lines + b"Content-Length: 0\r\n\r\n")
        assert parse(OK + lines[: -len(fold) - 2] + b"\r\n").headers.get("X-A").count("v") == 1
        return
    response = parse(OK + b"Transfer-Encoding: chunked\r\n\r\n0\r\n" + lines + b"\r\n")
    with pytest.raises(ProtocolError, match="more than 100 header lines"):
        body(response)


@pytest.mark.parametrize(
    "lengths",
    [[b"-1"], [b"+5"], [b"5 5"], [b"5, 5"], [b"0x5"], [b""], [b"\xb2"], [b"5", b"6"], [b"9" * 19]],
)
def test_an_invalid_or_conflicting_content_length_is_an_error(lengths: list[bytes]) -> None:
    head = b"".join(b"Content-Length: " + value + b"\r\n" for value in lengths)
    with pytest.raises(ProtocolError, match="Content-Length"):
        parse(OK + head + b"\r\nhello")


def test_the_same_content_length_twice_is_one_length() -> None:
    assert body(parse(OK + b"Content-Length: 5\r\nContent-Length:  5 \r\n\r\nhello!")) == b"hello"


def test_a_body_short_of_its_content_length_is_an_error_not_a_shorter_body() -> None:
    response = parse(OK + b"Content-Length: 10\r\n\r\nhello")
    with pytest.raises(ProtocolError, match="cut short: 5 of its Content-Length bytes never came"):
        body(response)


def test_chunked_wins_over_a_content_length_and_the_connection_is_not_reused() -> None:
    response = parse(OK + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    assert (body(response), response.will_close) == (b"hello", True)


@pytest.mark.parametrize("coding", [b"gzip", b"gzip, chunked", b"chunked\r\nTransfer-Encoding: chunked", b"identity"])
def test_a_transfer_coding_other_than_chunked_is_an_error(coding: bytes) -> None:
    with pytest.raises(ProtocolError, match="Transfer-Encoding"):
        parse(OK + b"Transfer-Encoding: " + coding + b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")


@pytest.mark.parametrize(
    "chunks",
    [b"1" * 17 + b"\r\n", b"-5\r\nhello\r\n", b"+5\r\nhello\r\n", b"\r\n", b"5x\r\nhello\r\n", b"5;" + b"e" * 5000 + b"\r\n",
     b"5\r\nhello", b"5\r\nhello\r\n", b"5\r\nhelloXX\r\n0\r\n\r\n", b"ffffffffffffffff\r\nabc", b"5\rhello\r\n0\r\n\r\n"],
)  # fmt: skip
def test_a_broken_chunked_body_is_an_error(chunks: bytes) -> None:
    """Sizes past 16 hex digits, signs, garbage, over-long lines, a missing CRLF or last chunk, a chunk cut short."""
    response = parse(OK + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
    with pytest.raises(ProtocolError):
        body(response, 1 << 16)


def test_trailers_are_bounded_too() -> None:
    trailers = b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEADERS + 1))
    response = parse(OK + b"Transfer-Encoding: chunked\r\n\r\n0\r\n" + trailers + b"\r\n")
    with pytest.raises(ProtocolError, match="more than 100 header lines"):
        body(response)


def test_a_request_is_one_line_host_headers_and_a_length_for_a_body() -> None:
    sent = request_bytes("POST", "/token?x=1", "reg.test:5000", {"Content-Type": "a/b"}, b"k=v")
    assert (
        sent == b"POST /token?x=1 HTTP/1.1\r\nHost: reg.test:5000\r\nContent-Type: a/b\r\nContent-Length: 3\r\n\r\nk=v"
    )
    assert request_bytes("GET", "/v2/", "r", {}, None) == b"GET /v2/ HTTP/1.1\r\nHost: r\r\n\r\n"


@pytest.mark.parametrize(
    ("target", "headers"),
    [("/a b", {}), ("/a\r\nX: y", {}), ("", {}), ("/", {"Authorization": "Bearer t\r\nX-Injected: 1"}),
     ("/", {"X-A": "a\nb"}), ("/", {"Bad Name": "v"}), ("/", {"X-A\r\n": "v"})],
)  # fmt: skip
def test_a_request_that_could_split_into_two_is_refused(target: str, headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"request target|invalid header"):
        request_bytes("GET", target, "reg.test", headers, None)
