"""registry/keptpools.py: a server worker keeps idle registry connections for the next call that would make them.

The suite's Distribution registry answers, behind a relay that counts the TCP connections made to it. A transport is
one call's; closing it ends the call. Outside a worker nothing is kept; in one, the next call with the same trust
and pool size goes out on the same connection, at most two per origin are kept, none through an https proxy, none
idle past 90 s, none the registry dropped, and at most four profiles' worth.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocivendir.registry import keptpools, pools, tlscontexts
from ocivendir.registry.connections import Agent
from ocivendir.registry.proxy import ProxyConfig
from ocivendir.registry.transport import ClientOptions, Route, Transport
from tests.support.cutter import CuttingProxy
from tests.support.registry import Registry

pytestmark = pytest.mark.integration


@pytest.fixture
def relay(registry: Registry) -> Iterator[CuttingProxy]:
    """The registry behind a relay; `len(relay.sent)` is the number of connections made to it."""
    with CuttingProxy(registry.host, 0) as proxy:
        yield proxy


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process serves calls, with nothing kept yet; whatever a test keeps is closed after it."""
    monkeypatch.setattr(keptpools, "_serving", [True])
    keptpools.close_all()
    yield
    keptpools.close_all()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The kept connections' clock, moved on by adding seconds to the one number in the list."""
    offset = [0.0]

    def later() -> float:
        return time.monotonic() + offset[0]

    monkeypatch.setattr(keptpools, "monotonic", later)
    monkeypatch.setattr(pools, "monotonic", later)
    return offset


def _call(
    relay: CuttingProxy, options: ClientOptions | None = None, *, requests: int = 1, scheme: str = "http"
) -> None:
    """One call's transport: `requests` GETs of /v2/, one after another, then the call ends."""
    transport = Transport(options or ClientOptions())
    route = Route(registry=relay.host, host=relay.host, scheme=scheme)
    try:
        for _ in range(requests):
            response = transport.send("GET", route, "/v2/", {}, stream=False, what="test")
            assert response.status_code == 200
            response.close()
    finally:
        transport.close()


def _agent(relay: CuttingProxy) -> Agent:
    """An agent that has made one request (its connection idle in its adapter's pool)."""
    agent = Agent(lambda: pytest.fail("no TLS here"), "test", 8)
    response = agent.request("GET", f"http://{relay.host}/v2/", {}, timeouts=(5, 5), proxy_for=lambda *_: None)
    assert response.content == b"{}"  # read: its connection goes back to the pool
    response.close()
    return agent


def test_a_process_that_is_not_a_worker_keeps_nothing(relay: CuttingProxy) -> None:
    _call(relay)
    _call(relay)
    assert len(relay.sent) == 2
    assert keptpools.kept_sockets() == frozenset()


@pytest.mark.usefixtures("worker")
def test_a_workers_next_call_with_the_same_trust_goes_out_on_the_kept_connection(relay: CuttingProxy) -> None:
    _call(relay, requests=2)
    assert len(keptpools.kept_sockets()) == 1
    _call(relay)
    _call(relay)
    assert len(relay.sent) == 1


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize(
    "other",
    [
        ClientOptions(ssl_cert_file="/nonexistent/other-bundle.pem"),
        ClientOptions(verify_certs=False),
        ClientOptions(pool_size=3),
    ],
    ids=["other SSL_CERT_FILE", "verification off", "another pool size"],
)
def test_a_call_asking_other_trust_or_another_pool_size_connects_anew(
    relay: CuttingProxy, other: ClientOptions
) -> None:
    _call(relay)
    _call(relay, other)
    assert len(relay.sent) == 2
    _call(relay)  # the first profile's connection is still kept for it
    _call(relay, other)
    assert len(relay.sent) == 2


@pytest.mark.usefixtures("worker")
def test_a_call_that_logs_its_connections_connects_anew_and_logs_what_it_would_in_process(
    relay: CuttingProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """--debug shows urllib3's "Starting new HTTP connection (1): …": a call on kept connections would lack it."""
    _call(relay)
    with caplog.at_level(logging.DEBUG):
        for _ in range(2):
            caplog.clear()
            _call(relay)
            started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Starting new")]
            assert started == [f"Starting new HTTP connection (1): {relay.host}"]
    assert len(relay.sent) == 3
    _call(relay)  # without debug logs, the last call's connection serves it
    assert len(relay.sent) == 3


@pytest.mark.usefixtures("worker")
def test_at_most_two_idle_connections_per_origin_stay_open(relay: CuttingProxy) -> None:
    transport = Transport(ClientOptions())
    route = Route(registry=relay.host, host=relay.host, scheme="http")
    held = [transport.send("GET", route, "/v2/", {}, stream=True, what="test") for _ in range(3)]  # three at once
    for response in held:
        assert response.content == b"{}"  # read: its connection goes back to the pool
        response.close()
    transport.close()
    assert len(relay.sent) == 3
    assert len(keptpools.kept_sockets()) == 2


@pytest.mark.usefixtures("worker")
def test_a_connection_idle_past_ninety_seconds_is_closed_not_used(
    relay: CuttingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    _call(relay)
    later = keptpools.monotonic() + keptpools.IDLE_SECONDS + 1
    monkeypatch.setattr(keptpools, "monotonic", lambda: later)
    keptpools.expire()
    assert keptpools.kept_sockets() == frozenset()
    _call(relay)
    assert len(relay.sent) == 2


@pytest.mark.usefixtures("worker")
def test_a_connection_idle_past_ninety_seconds_is_closed_though_its_adapter_serves_other_origins_meanwhile(
    relay: CuttingProxy, registry: Registry, clock: list[float]
) -> None:
    """The bound is each connection's idle time, as Go's: a call to another registry does not keep it fresh."""
    offset = clock
    with CuttingProxy(registry.host, 0) as other:
        _call(relay)
        for _ in range(4):  # a call a minute, to the other origin (the same trust: the same adapter)
            offset[0] += 60
            _call(other)
        assert len(keptpools.kept_sockets()) == 1
        _call(relay)  # its connection has been idle four minutes
        assert len(other.sent) == 1
    assert len(relay.sent) == 2
    transport = Transport(ClientOptions())  # an answer read for two minutes: its connection idle from its end only
    response = transport.send("GET", Route(registry=relay.host, host=relay.host, scheme="http"), "/v2/", {},
                              stream=True, what="test")  # fmt: skip
    offset[0] += 120
    assert response.content == b"{}"
    response.close()
    transport.close()
    _call(relay)
    assert len(relay.sent) == 2


@pytest.mark.usefixtures("worker")
def test_each_connection_is_closed_once_idle_ninety_seconds_and_not_before(
    relay: CuttingProxy, registry: Registry, clock: list[float]
) -> None:
    offset = clock
    with CuttingProxy(registry.host, 0) as other:
        _call(relay)
        offset[0] += 60
        _call(other)  # the same adapter: one connection idle 60 s, one idle since now
        assert keptpools.IDLE_SECONDS - 60 < (keptpools.next_expiry() or 0) < keptpools.IDLE_SECONDS - 59
        offset[0] += 40
        keptpools.expire()
        assert len(keptpools.kept_sockets()) == 1
        _call(other)
        _call(relay)
        assert (len(relay.sent), len(other.sent)) == (2, 1)
        offset[0] += keptpools.IDLE_SECONDS + 1
        keptpools.expire()
        assert keptpools.kept_sockets() == frozenset()
        assert keptpools.next_expiry() is None


@pytest.mark.usefixtures("worker")
def test_a_worker_waiting_for_its_next_call_wakes_to_close_what_has_been_idle_too_long(
    relay: CuttingProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Else a registry's closed end leaves the worker's open (CLOSE_WAIT) until a call comes, however late."""
    from ocivendir.server import worker  # noqa: PLC0415 - the server's worker loop, for this test alone

    _call(relay)
    offset = [keptpools.IDLE_SECONDS + 1]
    monkeypatch.setattr(keptpools, "monotonic", lambda: time.monotonic() + offset[0])
    expire = keptpools.expire
    path = str(tmp_path / "listener.sock")

    def expire_then_call() -> None:  # once the worker has closed them, a call comes
        expire()
        calls.append(socket.socket(socket.AF_UNIX))
        calls[-1].connect(path)

    calls: list[socket.socket] = []
    monkeypatch.setattr(keptpools, "expire", expire_then_call)
    channel, parent = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with socket.socket(socket.AF_UNIX) as listener, channel, parent:
        listener.bind(path)
        listener.listen()
        waiter = worker._waiter(listener, channel)
        late = threading.Timer(60, lambda: socket.socket(socket.AF_UNIX).connect(path))  # a worker that never wakes
        late.start()
        try:
            conn, parent_gone = worker._next(waiter, listener, channel)
        finally:
            late.cancel()
            waiter.close()
        assert conn is not None
        conn.close()
    assert not parent_gone
    assert keptpools.kept_sockets() == frozenset()
    assert len(calls) == 1
    calls[0].close()


@pytest.mark.usefixtures("worker")
def test_at_most_four_profiles_are_kept_the_least_recently_used_closed_first(relay: CuttingProxy) -> None:
    sizes = range(1, keptpools.KEPT + 2)
    for size in sizes:
        _call(relay, ClientOptions(pool_size=size))
    assert len(keptpools.kept_sockets()) == keptpools.KEPT
    for size in reversed(sizes):
        _call(relay, ClientOptions(pool_size=size))
    assert len(relay.sent) == keptpools.KEPT + 2  # only the least recently used one had to connect again


@pytest.mark.usefixtures("worker")
def test_a_connection_the_registry_dropped_is_neither_kept_nor_a_failure(relay: CuttingProxy) -> None:
    adapter = _agent(relay).detach()
    assert adapter is not None
    assert len(adapter.keep_idle(2, 2, 0.0, 16)) == 1
    relay.hang_up()
    for _ in range(100):  # the relay's FIN reaches the client end at once on loopback
        if adapter.keep_idle(2, 2, 0.0, 16) == []:
            break
        time.sleep(0.01)
    else:
        pytest.fail("a dropped connection was kept")
    adapter.close()
    _call(relay)
    relay.hang_up()
    _call(relay)  # the kept connection turns out dropped: a new one, no error
    assert len(relay.sent) == 3


@pytest.mark.usefixtures("worker")
def test_callers_each_with_a_proxy_of_their_own_leave_connections_through_two_proxies_at_most(
    registry: Registry,
) -> None:
    """A manager per proxy URL (requests', credentials included), one per caller, must not pile up in a worker.

    The relay stands for an HTTP proxy (Distribution answers an absolute-form request line); a registry host that is
    not loopback goes through it. The most recently used proxies keep their connections; older callers' are closed
    and their managers (their proxy credentials) dropped.
    """
    port = registry.host.rpartition(":")[2]
    route = Route(registry=f"registry.example:{port}", host=f"registry.example:{port}", scheme="http")

    def call(proxy: str) -> None:
        transport = Transport(ClientOptions(proxy=ProxyConfig(http_proxy=proxy)))
        try:
            assert transport.send("GET", route, "/v2/", {}, stream=False, what="test").status_code == 200
        finally:
            transport.close()

    with CuttingProxy(registry.host, 0) as relay:
        proxies = [f"http://caller{n}:secret{n}@{relay.host}" for n in range(6)]
        for proxy in proxies:
            call(proxy)
        assert len(relay.sent) == len(proxies)
        assert len(keptpools.kept_sockets()) == keptpools.PROXIES
        [(_, adapter, _)] = keptpools._kept.values()
        assert sorted(adapter.proxy_manager) == proxies[-keptpools.PROXIES :]
        call(proxies[-1])  # the latest caller's proxy connection is still there for it
        assert len(relay.sent) == len(proxies)


@pytest.mark.usefixtures("worker")
def test_connections_through_an_https_proxy_are_never_kept(relay: CuttingProxy) -> None:
    adapter = _agent(relay).detach()
    assert adapter is not None
    port = int(relay.host.rpartition(":")[2])
    # the direct connection, moved into the pool of an https proxy's manager (where one made through it would sit)
    [(_, direct)] = adapter._pools()
    proxied = adapter.proxy_manager_for("https://127.0.0.1:9").connection_from_host("127.0.0.1", port, scheme="http")
    conn = direct._get_conn()
    proxied._get_conn().close()
    proxied._put_conn(conn)
    assert conn.sock is not None
    assert adapter.keep_idle(2, 2, 0.0, 16) == []
    assert conn.sock is None
    adapter.close()


@pytest.mark.usefixtures("worker")
def test_an_https_connection_is_used_again_only_with_the_very_context_it_was_made_with(
    tls_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CA file rewritten between calls makes a new TLS context (`registry/tlscontexts.py`): a new connection too."""
    monkeypatch.setattr(tlscontexts, "SETTLED_NS", 0)  # the files written here count as settled at once
    assert tls_registry.ca_cert is not None
    ca = tmp_path / "ca.pem"
    ca.write_bytes(tls_registry.ca_cert.read_bytes())
    options = ClientOptions(ssl_cert_file=str(ca), ssl_cert_dir=str(tmp_path / "no-certs"))
    with CuttingProxy(tls_registry.host, 0) as relay:
        _call(relay, options, scheme="https")
        made = len(relay.sent)  # a loopback host may speak plain HTTP: a bare ClientHello asked first
        _call(relay, options, scheme="https")
        assert len(relay.sent) == made
        ca.write_bytes(tls_registry.ca_cert.read_bytes() + b"\n")  # the same CA, the file rewritten
        _call(relay, options, scheme="https")
        assert len(relay.sent) == 2 * made
        _call(relay, options, scheme="https")
        assert len(relay.sent) == 2 * made


def test_a_connection_returned_while_its_pool_is_looked_over_is_closed_when_no_room_is_left() -> None:
    """An interrupted call's request may hand its connection back as the call ends: the one left over is closed."""
    from queue import LifoQueue  # noqa: PLC0415

    class Connection:
        closed = False

        def close(self) -> None:
            self.closed = True

    idle: LifoQueue[object] = LifoQueue(2)
    first, second, returned = Connection(), Connection(), Connection()
    idle.put_nowait(first)
    idle.put_nowait(second)
    taken = pools._drain(idle)
    assert taken == [second, first]
    idle.put_nowait(returned)  # meanwhile
    pools._refill(idle, taken)
    assert [idle.get_nowait(), idle.get_nowait()] == [first, returned]
    assert second.closed
    assert not first.closed
    assert not returned.closed


@pytest.mark.usefixtures("worker")
def test_at_most_max_idle_connections_are_kept_in_all(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Callers reaching many registries, with several trust profiles, leave a bounded number of sockets open."""
    monkeypatch.setattr(keptpools, "MAX_IDLE", 3)
    relays = [CuttingProxy(registry.host, 0).start() for _ in range(4)]  # four origins
    try:
        for relay in relays:  # one profile: its adapter gathers a pool per origin, one connection each
            _call(relay)
        assert len(keptpools.kept_sockets()) == 3
        _call(relays[0], ClientOptions(pool_size=3))  # another profile: the least recently used adapter goes
        assert len(keptpools.kept_sockets()) == 1
    finally:
        for relay in relays:
            relay.stop()
