"""What the commands share: JSON output."""

from __future__ import annotations

import json
import sys


def print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")
