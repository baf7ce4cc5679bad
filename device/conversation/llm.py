"""An optional, operator-configured LLM (an OpenAI-compatible chat API), its reply streamed.

The chat completion is asked for as a stream of server-sent events, so the first sentence can be
spoken while the rest is generated. Only the configured address is ever contacted: the request
goes straight to it with http.client (no proxy from the environment, no redirect followed).

A reader thread owns the connection and turns the events into a queue of text pieces; the caller
takes them with the deadlines of `[llm]`: `first_token_s` for the first piece (and at most between
two), `reply_s` for the whole reply. When a deadline passes, or the caller is cancelled (the
visitor interrupted), the connection is shut down, which also ends a read blocked in the reader.
"""

from __future__ import annotations

import http.client
import json
import logging
import queue
import socket
import threading
import time
import urllib.parse
from typing import Callable, Iterator

from engines.errors import OrinAvatarError

from device.settings import LlmSettings

log = logging.getLogger(__name__)
MAX_REPLY_BYTES = 1 << 20  # a reply's events, in all: far above any spoken answer
POLL_S = 0.05  # how often a waiting caller looks at its cancel event


class LlmError(OrinAvatarError):
    """The LLM gave nothing usable: before the first piece, the knowledge base answers instead."""


class LlmCut(LlmError):
    """The reply stopped early (a deadline passed, the stream broke): it ends at its last full sentence."""


class LlmCancelled(LlmCut):
    """The visitor interrupted: the reply ends here, its unfinished sentence unsaid."""


class LlmClient:
    def __init__(self, settings: LlmSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock

    def stream(self, messages: list[dict[str, str]], cancelled: threading.Event) -> Iterator[str]:
        """The reply's text, piece by piece as the server sends it. Raises LlmError if no piece comes
        within `first_token_s`, LlmCut if the reply stops early after that, LlmCancelled once
        `cancelled` is set."""
        body = json.dumps(
            {
                "model": self.settings.model,
                "messages": messages,
                "stream": True,
                "max_tokens": self.settings.max_words * 2,
                "temperature": self.settings.temperature,
            }
        ).encode()
        line = _Line(self._connection())
        pieces: queue.SimpleQueue = queue.SimpleQueue()
        reader = threading.Thread(
            target=_read_events, args=(line, self._path(), body, pieces, self.clock), name="llm-stream", daemon=True
        )
        started = last = self.clock()
        reader.start()
        first = True
        try:
            while True:
                # Deadlines are on the pieces' arrival: a listener still speaking the last sentence does not count.
                deadline = (
                    started + self.settings.first_token_s
                    if first
                    else min(last + self.settings.first_token_s, started + self.settings.reply_s)
                )
                kind, value, arrived = self._take(pieces, deadline, cancelled)
                if kind == "piece" and arrived > deadline:
                    kind, value = "error", "the LLM paused longer than first_token_s or went on past reply_s"
                if kind == "end":
                    return
                if kind == "cancelled":
                    raise LlmCancelled(value)
                if kind == "error":
                    raise (LlmError if first else LlmCut)(value)
                first, last = False, arrived
                yield value
        finally:
            line.hang_up()
            reader.join(timeout=1)

    def _take(self, pieces: queue.SimpleQueue, deadline: float, cancelled: threading.Event) -> tuple[str, str, float]:
        """The next (kind, text, arrival) from the reader: what has arrived first, then ("cancelled", ...)
        once cancelled, ("error", ...) once the deadline has passed with nothing come."""
        while True:
            if cancelled.is_set():
                return "cancelled", "the visitor interrupted", self.clock()
            try:
                return pieces.get_nowait()
            except queue.Empty:
                pass
            left = deadline - self.clock()
            if left <= 0:
                return (
                    "error",
                    f"nothing from the LLM by its deadline (first_token_s {self.settings.first_token_s} s, "
                    f"reply_s {self.settings.reply_s} s)",
                    self.clock(),
                )
            try:
                return pieces.get(timeout=min(left, POLL_S))
            except queue.Empty:
                continue

    def _connection(self) -> http.client.HTTPConnection:
        url = urllib.parse.urlsplit(self.settings.url)
        connection_class = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        # The socket's own timeout only guards the reader; the caller's deadlines are the real limits.
        return connection_class(url.hostname, url.port, timeout=self.settings.reply_s + 1)

    def _path(self) -> str:
        return urllib.parse.urlsplit(self.settings.url).path.rstrip("/") + "/chat/completions"


class _Line:
    """The connection to the LLM, which the reader uses and the caller may hang up at any moment."""

    def __init__(self, connection: http.client.HTTPConnection) -> None:
        self.connection = connection
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._hung_up = False

    def connect(self) -> None:
        """On the reader thread; refused if the caller has hung up meanwhile."""
        self.connection.connect()
        with self._lock:
            self._socket = self.connection.sock  # kept: http.client drops it once the response owns it
            if self._hung_up:
                raise LlmError("hung up")

    @property
    def hung_up(self) -> bool:
        with self._lock:
            return self._hung_up

    def hang_up(self) -> None:
        """End it now, from the caller's thread: a shutdown wakes the reader's blocked read, and the
        reader closes the connection (closing it here would pull http.client's file from under it)."""
        with self._lock:
            self._hung_up = True
            if self._socket is not None:
                try:
                    self._socket.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _read_events(line: _Line, path: str, body: bytes, pieces: queue.SimpleQueue, clock: Callable[[], float]) -> None:
    """On the reader thread: POST, then each event's text as ("piece", text, arrival); ("end", ...) or
    ("error", why, ...) last. Malformed events are skipped (counted in the log), not fatal."""
    malformed = 0
    connection = line.connection
    try:
        line.connect()
        connection.request("POST", path, body, {"Content-Type": "application/json", "Accept": "text/event-stream"})
        response = connection.getresponse()
        if response.status != 200:  # a redirect too: only the configured address is contacted
            raise LlmError(f"HTTP {response.status} {response.reason}")
        streamed = response.getheader("Content-Type", "").startswith("text/event-stream")
        for data in _event_data(response) if streamed else [response.read(MAX_REPLY_BYTES).decode("utf-8", "replace")]:
            if data == "[DONE]":
                break
            text = _delta_text(data)
            if text is None:
                malformed += 1
            elif text:
                pieces.put(("piece", text, clock()))
        pieces.put(("end", "", clock()))
    except Exception as exc:  # a broken line fails in many ways inside http.client; the caller hears why
        if not line.hung_up:  # after a hang-up nobody listens
            pieces.put(("error", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, clock()))
    finally:
        connection.close()
        if malformed:
            log.warning("the LLM sent %d malformed event(s); they were skipped", malformed)


def _event_data(response: http.client.HTTPResponse) -> Iterator[str]:
    """The `data:` fields of a server-sent event stream (https://html.spec.whatwg.org/#server-sent-events)."""
    size, lines = 0, []
    while line := response.readline(MAX_REPLY_BYTES):
        size += len(line)
        if size > MAX_REPLY_BYTES:
            raise LlmError(f"reply longer than {MAX_REPLY_BYTES} bytes")
        line = line.decode("utf-8", "replace").rstrip("\r\n")
        if line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
        elif not line and lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def _delta_text(data: str) -> str | None:
    """The text of one chat-completion chunk ("" for a chunk without text), None if malformed."""
    try:
        choice = json.loads(data)["choices"][0]
        text = (choice.get("delta") or choice.get("message") or {}).get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return text if isinstance(text, str) else None
