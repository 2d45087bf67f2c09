"""Test support: a real Distribution registry (Debian's `docker-registry`) on 127.0.0.1 with a random port.

Modes: `plain` (HTTP, anonymous), `htpasswd` (HTTP with Basic auth from a committed bcrypt file) and `tls` (HTTPS with
a CA and server certificate made with openssl at start-up). Request counts come from the registry's access log.

With `proxy_remote` set, the registry runs in Distribution's proxy mode (a pull-through cache of that URL, logging in
there with `proxy_credentials`), as fleets put one in front of the origin.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
USERNAME = "tester"
PASSWORD = "s3cret-pass"  # matches fixtures/htpasswd (bcrypt)
MIRROR_USERNAME = "mirroruser"
MIRROR_PASSWORD = "m1rror-pass"  # matches fixtures/htpasswd-mirror (bcrypt)
SENTINEL = "/ocivendir-test-sentinel/"  # outside /v2/: never routed, never forwarded by a proxy
_ACCESS = re.compile(r'"(GET|HEAD|POST|PUT|PATCH|DELETE) (\S+) HTTP/[0-9.]+" (\d{3})')


def binary() -> str | None:
    """The docker-registry binary, if installed."""
    return shutil.which("docker-registry") or (
        "/usr/bin/docker-registry" if Path("/usr/bin/docker-registry").exists() else None
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _make_tls(directory: Path) -> tuple[Path, Path, Path]:
    ca_key, ca_crt = directory / "ca.key", directory / "ca.crt"
    key, csr, crt = directory / "server.key", directory / "server.csr", directory / "server.crt"
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:registry.test\nbasicConstraints=CA:FALSE\n")
    run = ["openssl"]
    subprocess.run(
        [*run, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "2",
         "-subj", "/CN=ocivendir test CA"], check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [*run, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [*run, "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
         "-days", "2", "-extfile", ext], check=True, capture_output=True,
    )  # fmt: skip
    return ca_crt, crt, key


@dataclass
class Registry:
    """A running registry: its address, storage, access log and credentials."""

    mode: str
    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    ca_cert: Path | None = None
    proxy_remote: str | None = None
    proxy_credentials: tuple[str, str] | None = None
    htpasswd: Path = FIXTURES / "htpasswd"
    credentials: tuple[str, str] = (USERNAME, PASSWORD)
    log_path: Path = field(init=False)
    storage: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / "registry.log"
        self.storage = self.workdir / "storage"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def scheme(self) -> str:
        return "https" if self.mode == "tls" else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"

    def auth_header(self) -> dict[str, str]:
        if self.mode != "htpasswd":
            return {}
        username, password = self.credentials
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.ca_cert is None:
            return None
        return ssl.create_default_context(cafile=str(self.ca_cert))

    def _config(self) -> str:
        lines = [
            "version: 0.1",
            "log:",
            "  level: info",
            "  formatter: text",
            "  accesslog:",
            "    disabled: false",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.storage}",
            "  delete:",
            "    enabled: true",
            "  maintenance:",
            "    uploadpurging:",
            "      enabled: false",
            "http:",
            f"  addr: 127.0.0.1:{self.port}",
        ]
        if self.mode == "tls":
            ca, crt, key = _make_tls(self.workdir)
            self.ca_cert = ca
            lines += ["  tls:", f"    certificate: {crt}", f"    key: {key}"]
        if self.mode == "htpasswd":
            lines += ["auth:", "  htpasswd:", "    realm: ocivendir-test", f"    path: {self.htpasswd}"]
        if self.proxy_remote is not None:
            lines += ["proxy:", f"  remoteurl: {self.proxy_remote}"]
            if self.proxy_credentials is not None:
                lines += [f"  username: {self.proxy_credentials[0]}", f"  password: {self.proxy_credentials[1]}"]
        return "\n".join(lines) + "\n"

    def start(self) -> Registry:
        exe = binary()
        if exe is None:
            msg = "docker-registry is not installed"
            raise RuntimeError(msg)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        config = self.workdir / "config.yml"
        config.write_text(self._config())
        log = self.log_path.open("ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
        self.process = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                msg = f"docker-registry exited: {self.log_path.read_text()[-2000:]}"
                raise RuntimeError(msg)
            try:
                request = urllib.request.Request(f"{self.url}/v2/", headers=self.auth_header())
                with urllib.request.urlopen(request, timeout=1, context=self.ssl_context()):
                    return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.05)
        msg = "docker-registry did not become ready"
        raise RuntimeError(msg)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        """Start again on the same port with the same storage."""
        exe = binary()
        assert exe is not None
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [exe, "serve", str(self.workdir / "config.yml")], stdout=log, stderr=subprocess.STDOUT
        )
        self._wait_ready()

    # --- access log -----------------------------------------------------------------------------------------

    def requests(self) -> list[tuple[str, str, int]]:
        """Every request in the access log so far: (method, path, status), the harness's own sentinels left out."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        found = [(m.group(1), m.group(2), int(m.group(3))) for m in _ACCESS.finditer(text)]
        return [entry for entry in found if not entry[1].startswith(SENTINEL)]

    def mark(self) -> int:
        """A position in the access log (after every request answered so far)."""
        return len(self.settled_requests())

    def settled_requests(self) -> list[tuple[str, str, int]]:
        """The access log once every request answered before this call is in it.

        The registry writes a request's line after it answers, so a client that has exited may still have lines to
        come. A running registry is sent a sentinel request (a path outside /v2/, which a proxy-mode registry does
        not forward) and the log is read once the sentinel's own line is in it; a stopped one is read once it has
        been still for a moment.
        """
        running = self.process is not None and self.process.poll() is None and self._sentinel_logged()
        # a handler logs after its last byte is sent: on a loaded machine an earlier request's line can still come
        # just after the sentinel's (seen under load: a blob GET logged after the next test step's mark), so the log
        # must also have been still for a moment — briefly once the sentinel is in, longer without one
        pause = 0.02 if running else 0.2
        current = self.requests()
        still = 0
        while still < 2:
            time.sleep(pause)
            latest = self.requests()
            still = still + 1 if len(latest) == len(current) else 0
            current = latest
        return current

    def _sentinel_logged(self) -> bool:
        """Send a sentinel request and wait for its line; False when the registry could not be asked."""
        path = f"{SENTINEL}{uuid.uuid4().hex}"
        request = urllib.request.Request(f"{self.url}{path}", method="HEAD")
        try:
            urllib.request.urlopen(request, timeout=5, context=self.ssl_context()).close()
        except urllib.error.HTTPError:
            pass  # the 404 is the answer expected
        except OSError:
            return False
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if path in self.log_path.read_text(errors="replace"):
                return True
            time.sleep(0.02)
        return False

    def since(self, mark: int) -> list[tuple[str, str, int]]:
        """Requests logged after a mark."""
        return self.settled_requests()[mark:]

    def blob_file(self, digest: str) -> Path:
        """Where the registry stores a blob's bytes."""
        hex_part = digest.split(":", 1)[1]
        return self.storage / "docker/registry/v2/blobs/sha256" / hex_part[:2] / hex_part / "data"
