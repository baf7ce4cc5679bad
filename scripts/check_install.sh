#!/usr/bin/env bash
# The package installs like one: `pip install .` (not editable) into a fresh virtual environment, then,
# from another directory, the bundled demo and the unit files as package data. CI runs it after `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check .
cd "$work"
"$work/venv/bin/orin-avatar" demo --fast --out "$work/out" > "$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
test -s "$work/out/latency.json" && test -s "$work/out/avatar.mp4"
"$work/venv/bin/python" -c "from device.commands.service import unit_file; assert b'[Service]' in unit_file('orin-avatar.service')"
echo "install check passed: pip install . into a fresh venv, demo and unit files from $work"
