"""The address a class types: this machine's LAN IPv4 addresses, the URLs on them and their QR codes (segno).

Used by `make workshop` (the console) and the host page; nothing here opens a socket."""
from __future__ import annotations

import io
import ipaddress
import os
import socket

import psutil
import segno

WILDCARDS = ("0.0.0.0", "::", "")


def lan_addresses(environ=os.environ) -> list[str]:
    """Every non-loopback, non-link-local IPv4 address of this machine, or EXPLAINER_LAN_ADDRESSES when set
    (comma-separated: behind NAT or in a container, the address students reach is not the machine's own)."""
    given = [a.strip() for a in environ.get("EXPLAINER_LAN_ADDRESSES", "").split(",") if a.strip()]
    if given:
        return [str(ipaddress.IPv4Address(a)) for a in given]  # a typo is a named error, not a dead URL
    found = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family != socket.AF_INET:
                continue
            ip = ipaddress.IPv4Address(address.address)
            if not (ip.is_loopback or ip.is_link_local) and str(ip) not in found:
                found.append(str(ip))
    return found


def class_urls(bind: str, port: int, environ=os.environ) -> list[str]:
    """The URLs a student can open: each LAN address when Daphne listens on every interface, else the one it
    binds (127.0.0.1 serves this machine only)."""
    addresses = lan_addresses(environ) if bind in WILDCARDS else [bind]
    return [f"http://{address}:{port}/" for address in addresses]


def short_form(url: str) -> str:
    """What to write on the board: the address and port, without the scheme and slash."""
    return url.removeprefix("http://").rstrip("/")


def qr_terminal(url: str) -> str:
    """The URL's QR code drawn with block characters, for a console a phone camera can read."""
    out = io.StringIO()
    segno.make(url, error="m").terminal(out=out, compact=True)
    return out.getvalue()


def qr_svg(url: str) -> str:
    """The URL's QR code as inline SVG markup (no script, no external reference) for the host page."""
    return segno.make(url, error="m").svg_inline(scale=6, title=f"QR code of {url}", dark="#000", light="#fff")
