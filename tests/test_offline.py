"""No network at run time but the operator's LLM, and nothing written under $HOME but the product's own
directory: the demo and the daemon run in a network namespace of their own (only loopback, so nothing
they try leaves this machine) under strace, which records every connect and send with an address."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_daemon import Daemon, _visit

SYSCALLS = "connect,sendto,sendmsg,sendmmsg"
# A proxy no one runs, on loopback: a client that honours http_proxy (ONNX Runtime's telemetry did) goes
# there, and strace shows it, without anything reaching a real proxy.
PROXY_PORT = 9
_INET = re.compile(r'sin6?_port=htons\((\d+)\),.*?(?:sin_addr=inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")')
_RESOLVER = re.compile(r'sun_path="([^"]*(?:nscd|resolve)[^"]*)"')


def _can_trace_offline() -> bool:
    """strace and a network namespace of its own (unshare --net needs root, as make test runs)."""
    if shutil.which("strace") is None or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(
    not _can_trace_offline(), reason="needs strace and unshare --net as root (make test's set-up installs them)"
)


def offline(log: Path) -> list[str]:
    """The command prefix: a new network namespace with loopback up, then strace of the whole process tree."""
    return [
        "unshare",
        "--net",
        "sh",
        "-c",
        'ip link set lo up && exec "$@"',
        "offline",
        "strace",
        "-f",
        "-qq",
        "--seccomp-bpf",
        "-e",
        f"trace={SYSCALLS}",
        "-o",
        str(log),
    ]


def destinations(log: Path) -> list[str]:
    """Every network address (host:port) and name-service socket the traced processes tried to reach."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if (inet := _INET.search(line)) is not None:
            found.append(f"{inet.group(2) or inet.group(3)}:{inet.group(1)}")
        elif (resolver := _RESOLVER.search(line)) is not None:
            found.append(resolver.group(1))
    return found


def written(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() or p.is_symlink())


def test_the_traced_namespace_records_a_connection_attempt(tmp_path):
    """The recipe itself: connects over IPv4 and IPv6, and a name lookup, are seen (an empty list means none)."""
    log = tmp_path / "strace.log"
    probe = (
        "import socket\n"
        "for host in ('127.0.0.1', '::1'):\n"
        "    try: socket.create_connection((host, %d), 1)\n"
        "    except OSError: pass\n"
        "try: socket.getaddrinfo('example.org', 443)\nexcept OSError: pass\n" % PROXY_PORT
    )
    subprocess.run([*offline(log), sys.executable, "-c", probe], check=True, timeout=60)
    seen = destinations(log)
    assert f"127.0.0.1:{PROXY_PORT}" in seen and f"::1:{PROXY_PORT}" in seen, seen
    assert any(d.endswith(":53") or "nscd" in d or "resolve" in d for d in seen), seen


def test_the_demo_reaches_no_network_and_writes_only_its_own_directory(store, tmp_path):
    home, log = tmp_path / "user", tmp_path / "strace.log"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ORIN_AVATAR_HOME"} | {
        "HOME": str(home),
        "http_proxy": f"http://127.0.0.1:{PROXY_PORT}",
        "https_proxy": f"http://127.0.0.1:{PROXY_PORT}",
    }
    result = subprocess.run(
        [
            *offline(log),
            sys.executable,
            "-m",
            "device",
            "--store",
            str(store.root),
            "demo",
            "--fast",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "replies.wav").stat().st_size > 100_000
    assert destinations(log) == []
    assert all(p.startswith(".cache/orin-avatar") for p in written(home)), written(home)


def test_the_daemon_reaches_only_the_configured_llm_and_leaves_home_alone(store, tmp_path, daemons):
    """Every question goes to the LLM (knowledge_threshold 1.0) at a loopback address where nothing listens
    in the namespace: its connections are the only ones, and each turn still gets the knowledge base's answer."""
    home, log = tmp_path / "user", tmp_path / "strace.log"
    home.mkdir()
    config = tmp_path / "orin-avatar.toml"
    config.write_text('[llm]\nurl = "http://127.0.0.1:8089/v1"\nknowledge_threshold = 1.0\n')
    mic = _visit(tmp_path / "visit.wav", [1.0, "02-opening.wav", 9.0, "04-tickets.wav", 9.0])
    daemon = Daemon(
        tmp_path,
        store,
        mic,
        config,
        wrapper=offline(log),
        env={"HOME": str(home), "http_proxy": f"http://127.0.0.1:{PROXY_PORT}"},
    )
    daemons.append(daemon)
    daemon.wait_for("READY=1", 120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and daemon.status()["tally"].get("answered", 0) < 2:
        daemon.receive(time.monotonic() + 0.5)
    assert daemon.status()["tally"].get("answered", 0) >= 2
    daemon.receive(time.monotonic() + 5)  # telemetry started within seconds when it was on
    code, _, stderr = daemon.stop()
    assert code == 0, stderr[-3000:]
    seen = destinations(log)
    assert seen and set(seen) == {"127.0.0.1:8089"}, seen
    assert written(home) == []
