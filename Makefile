# The two commands of the README: `make demo` and `make test`. Both set up first (idempotent).
.PHONY: setup setup-test demo test bench install

setup:
	scripts/setup.sh

setup-test:
	scripts/setup.sh --test

demo: setup
	.venv/bin/orin-avatar demo --out out

test: setup-test
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/python -m pytest -q --durations=15 tests

bench: setup
	.venv/bin/orin-avatar bench models

# Install the systemd unit, its user and directories, and enable it (as root; the unit expects this
# checkout at /opt/orin-avatar).
install: setup
	.venv/bin/orin-avatar install-service
