"""A real X server (Xvfb) for the display tests, on a display number it picks itself.

Xvfb's -displayfd makes it choose a free display and write its number only once it accepts clients:
no fixed number to collide with a stale socket or lock left by another run, and no polling for a
socket file that appears before the server answers. -noreset: by default an X server resets when its
last client leaves, and a client that connects during the reset is refused. A test's screenshot is such
a client when it comes before the window's process has connected: Qt's connection was then refused in
2 of 30 starts on a loaded machine ("could not connect to display"; the window's process aborted).
"""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


@contextmanager
def x_server(width: int, height: int, *options: str, display: str = "") -> Iterator[tuple[str, subprocess.Popen]]:
    """(":<n>", the server's process) while running; the server is stopped after. `display` (":<n>")
    asks for that display, as an X server restarted on a kiosk comes back on its old one."""
    read, write = os.pipe()
    server = subprocess.Popen(
        [
            "Xvfb",
            *([display] if display else []),
            "-displayfd",
            str(write),
            "-screen",
            "0",
            f"{width}x{height}x24",
            "-nolisten",
            "tcp",
            "-noreset",
            *options,
        ],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        number = b""
        while not number.endswith(b"\n") and select.select([read], [], [], 30)[0]:
            chunk = os.read(read, 16)
            if not chunk:
                break
            number += chunk
        assert number.strip().isdigit(), f"Xvfb gave no display in 30 s (exit code {server.poll()})"
        yield f":{number.strip().decode()}", server
    finally:
        os.close(read)
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=10)


def screenshot(display: str, width: int, height: int) -> np.ndarray:
    """The whole screen of `display`, RGB, as ImageMagick's `import` reads it from the server."""
    shot = subprocess.run(
        ["import", "-display", display, "-window", "root", "-depth", "8", "rgb:-"], capture_output=True, timeout=30
    )
    assert shot.returncode == 0, shot.stderr
    return np.frombuffer(shot.stdout, np.uint8).reshape(height, width, 3)
