"""A second host on this machine: a network namespace joined to ours by a veth pair, for probing the doors of the
servers agentrl starts from beyond loopback.

`ForeignHost` makes the namespace and the pair (`ip netns add`, `ip link add type veth`), gives each end an address
in a private /30 that no interface or route of this machine uses, and removes both on exit, whatever happened. A
server bound to `host_address` is then reachable from the namespace as from another machine, and nothing outside
this machine ever is: the namespace has no other link and no route. It needs `ip` (iproute2) and CAP_NET_ADMIN; a
test that cannot make one fails, never skips.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import subprocess
import sys
from types import TracebackType
from typing import Self

PROBE = """
import json, sys, urllib.error, urllib.request
url, body, headers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
request = urllib.request.Request(url, data=body.encode() if body else None, headers=headers,
                                 method="POST" if body else "GET")
request.add_header("content-type", "application/json")
try:
    with urllib.request.urlopen(request, timeout=60) as answer:
        print(json.dumps([answer.status, answer.read().decode()]))
except urllib.error.HTTPError as error:
    print(json.dumps([error.code, error.read().decode()]))
"""
"""Run in the namespace: one HTTP request (POST when it has a body), printing `[status, body]`."""


class ForeignHostError(RuntimeError):
    """The namespace or its link could not be made here."""


class ForeignHost:
    """A network namespace with one veth link to this machine (see the module docstring)."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}{random.randrange(100):02d}"
        self.namespace = f"agentrl-probe-{tag}"
        self.link, self.peer = f"arp{tag}h", f"arp{tag}n"
        network = _free_network()
        self.host_address, self.foreign_address = (str(a) for a in network.hosts())
        self.prefix = network.prefixlen

    def __enter__(self) -> Self:
        try:
            _ip("netns", "add", self.namespace)
            _ip("link", "add", self.link, "type", "veth", "peer", "name", self.peer)
            _ip("link", "set", self.peer, "netns", self.namespace)
            _ip("addr", "add", f"{self.host_address}/{self.prefix}", "dev", self.link)
            _ip("link", "set", self.link, "up")
            _ip("netns", "exec", self.namespace, "ip", "addr", "add", f"{self.foreign_address}/{self.prefix}",
                "dev", self.peer)  # fmt: skip
            _ip("netns", "exec", self.namespace, "ip", "link", "set", self.peer, "up")
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()

    def remove(self) -> None:
        """Delete the link (its peer goes with it) and the namespace; what is already gone is skipped."""
        subprocess.run(["ip", "link", "del", self.link], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True, check=False)

    def request(self, url: str, body: dict | None = None, headers: dict[str, str] | None = None) -> tuple[int, str]:
        """One HTTP request to `url` from inside the namespace; returns the status and the body."""
        return _answer(subprocess.run(self.probe_command(url, body, headers), capture_output=True, text=True))

    def probe_command(self, url: str, body: dict | None = None, headers: dict[str, str] | None = None) -> list[str]:
        """The command that makes `request` (for a caller that runs it without blocking its event loop)."""
        payload = json.dumps(body) if body is not None else ""
        argv = [sys.executable, "-c", PROBE, url, payload, json.dumps(headers or {})]
        return ["ip", "netns", "exec", self.namespace, *argv]


def parse_answer(stdout: str, stderr: str, returncode: int) -> tuple[int, str]:
    """`[status, body]` printed by `PROBE`; raises with its output when it printed none (it could not connect)."""
    if returncode != 0:
        raise ForeignHostError(f"the probe from the namespace failed ({returncode}): {stderr.strip()[-2000:]}")
    status, text = json.loads(stdout)
    return int(status), str(text)


def _answer(done: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    return parse_answer(done.stdout, done.stderr, done.returncode)


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise ForeignHostError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()} (needs root or CAP_NET_ADMIN)")


def _free_network() -> ipaddress.IPv4Network:
    """A /30 in 10.0.0.0/8 that overlaps no address or route of this machine."""
    used = _used_networks()
    for _ in range(200):
        candidate = ipaddress.ip_network(
            f"10.{random.randrange(256)}.{random.randrange(256)}.{4 * random.randrange(64)}/30"
        )
        if not any(candidate.overlaps(net) for net in used):
            return candidate
    raise ForeignHostError("no free /30 in 10.0.0.0/8 for the namespace's link")


def _used_networks() -> list[ipaddress.IPv4Network]:
    found = []
    for command in (["ip", "-4", "-o", "addr", "show"], ["ip", "-4", "route", "show", "table", "all"]):
        out = subprocess.run(command, capture_output=True, text=True).stdout
        for word in out.split():
            try:
                found.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                continue
    return [net for net in found if isinstance(net, ipaddress.IPv4Network) and net.prefixlen > 0]
