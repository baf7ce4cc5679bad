"""An optional, operator-configured LLM on the local network (OpenAI-compatible chat API).

Only what the operator configures is contacted; every call has a hard timeout, and anything but a
well-formed answer in time returns None so the knowledge base answers instead.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from device.settings import LlmSettings

log = logging.getLogger(__name__)


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
        request = urllib.request.Request(self.settings.url.rstrip("/") + "/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as response:
                reply = json.loads(response.read(1 << 20))
            text = reply["choices"][0]["message"]["content"]
        except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning("LLM at %s gave no usable answer (%s); the knowledge base answers", self.settings.url, exc)
            return None
        if not isinstance(text, str) or not text.strip():
            log.warning("LLM at %s returned an empty answer; the knowledge base answers", self.settings.url)
            return None
        return " ".join(text.split()[: self.settings.max_words])
