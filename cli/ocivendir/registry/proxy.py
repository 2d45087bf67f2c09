"""Owns: choosing a proxy for a URL as Go's net/http does (HTTP(S)_PROXY, NO_PROXY with suffixes, CIDRs, ports)."""

from __future__ import annotations

from dataclasses import dataclass

from ocivendir.oci.reference import is_loopback

__all__ = ["ProxyConfig"]


@dataclass(frozen=True, kw_only=True)
class ProxyConfig:
    """The proxy variables, already read (upper case first) by settings."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""

    def for_url(self, scheme: str, host: str, port: int) -> str | None:
        """The proxy URL to use, or None for a direct connection."""
        proxy = self.https_proxy if scheme == "https" else self.http_proxy
        if not proxy or is_loopback(host) or self._excluded(host, port):
            return None
        return proxy if "://" in proxy else f"http://{proxy}"

    def _excluded(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]")
        for raw in self.no_proxy.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return True
            if _matches(entry, host, port):
                return True
        return False


def _matches(entry: str, host: str, port: int) -> bool:
    import ipaddress  # noqa: PLC0415 - only a connection needs it (ipaddress alone costs more than a warm sync's work)

    try:
        network = ipaddress.ip_network(entry, strict=False)
    except ValueError:
        network = None
    if network is not None and "/" in entry:
        try:
            return ipaddress.ip_address(host) in network
        except ValueError:
            return False
    name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
    if entry_port and entry_port != str(port):
        return False
    name = name.strip("[]")
    if name.startswith("*."):
        name = name[1:]
    if name.startswith("."):
        return host.endswith(name)
    return host == name or host.endswith("." + name)
