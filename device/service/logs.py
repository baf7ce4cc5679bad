"""Logging to the journal (with structured fields) under systemd, to stderr otherwise.

Without journald, JournalHandler drops records silently, so it is used only when systemd started
us (JOURNAL_STREAM or INVOCATION_ID set). Extra fields passed with `extra={"TURN_ID": 3}` become
journal fields (`journalctl -u orin-avatar TURN_ID=3`).
"""

from __future__ import annotations

import logging
import os
import sys


def setup_logging(verbose: bool = False) -> str:
    """Configure the root logger; returns where logs go ('journal' or 'stderr')."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    if os.environ.get("JOURNAL_STREAM") or os.environ.get("INVOCATION_ID"):
        from systemd.journal import JournalHandler

        root.addHandler(JournalHandler(SYSLOG_IDENTIFIER="orin-avatar"))
        return "journal"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    return "stderr"
