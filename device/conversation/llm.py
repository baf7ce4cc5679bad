"""An optional, operator-configured LLM on the local network (OpenAI-compatible chat API).

Only the configured address is ever contacted: the request goes straight to it with http.client
(no proxy from the environment, no redirect followed), and `timeout_s` bounds the whole call, not
each read, so a server that drips bytes cannot hold a turn. Anything but a well-formed answer in
time returns None, and the knowledge base answers instead.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.parse

from device.settings import LlmSettings

log = logging.getLogger(__name__)
MAX_REPLY_BYTES = 1 << 20


class LlmClient:
    def __init__(self, settings: LlmSettings) -> None:
        self.settings = settings

    def answer(self, question: str) -> str | None:
        """The LLM's reply, or None when it is slow, unreachable or makes no sense."""
        body = json.dumps({
            "model": self.settings.model,
            "messages": [{"role": "system", "content": self.settings.system_prompt},
                         {"role": "user", "content": question}],
            "max_tokens": self.settings.max_words * 2,
            "temperature": 0.3,
        }).encode()
        try:
            reply = json.loads(self._post("/chat/completions", body))
            text = reply["choices"][0]["message"]["content"]
        except (OSError, TimeoutError, http.client.HTTPException, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning("LLM at %s gave no usable answer (%s); the knowledge base answers", self.settings.url, exc)
            return None
        if not isinstance(text, str) or not text.strip():
            log.warning("LLM at %s returned an empty answer; the knowledge base answers", self.settings.url)
            return None
        return " ".join(text.split()[: self.settings.max_words])

    def _post(self, path: str, body: bytes) -> bytes:
        """POST to the configured address; the whole exchange within `timeout_s`."""
        url = urllib.parse.urlsplit(self.settings.url)
        connection_class = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        deadline = time.monotonic() + self.settings.timeout_s
        connection = connection_class(url.hostname, url.port, timeout=self.settings.timeout_s)
        try:
            connection.request("POST", url.path.rstrip("/") + path, body, {"Content-Type": "application/json"})
            sock = connection.sock  # the response reads from it even after the connection lets it go
            sock.settimeout(_remaining(deadline))
            response = connection.getresponse()
            if response.status != 200:  # a redirect too: only the configured address is contacted
                raise ValueError(f"HTTP {response.status} {response.reason}")
            chunks, size = [], 0
            while chunk := _read_some(sock, response, deadline):
                size += len(chunk)
                if size > MAX_REPLY_BYTES:
                    raise ValueError(f"reply longer than {MAX_REPLY_BYTES} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            connection.close()


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no complete reply within timeout_s")
    return left


def _read_some(sock, response: http.client.HTTPResponse, deadline: float) -> bytes:
    sock.settimeout(_remaining(deadline))
    return response.read1(65536)
