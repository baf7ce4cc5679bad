"""`orin-avatar status`, `doctor` and `install-service`: the commands around the daemon."""

from __future__ import annotations

import argparse
import importlib.resources
import json
import shutil
import subprocess
import sys
from pathlib import Path

from engines.errors import InputError, OrinAvatarError

from device.app import App
from device.commands.context import check_wav_out, print_json
from device.service.daemon import Daemon, RunOptions
from device.service.doctor import run_checks
from device.service.logs import setup_logging
from device.service.status_socket import read_status
from device.sound.echo_room import EchoPath

UNIT_DIR = Path("/etc/systemd/system")


def register(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="the daemon (what systemd starts)")
    run.add_argument("--mic", type=Path, help="a WAV file as the microphone (replays a recorded visit)")
    run.add_argument("--speaker", type=Path, help="write the replies to this WAV file instead of the sound card")
    run.add_argument("--camera", type=Path, help="a video file as the camera")
    run.add_argument("--loop", action="store_true", help="play the --mic file again and again (soak tests)")
    run.add_argument(
        "--echo-db",
        type=float,
        metavar="DB",
        help="with --mic and --speaker: the replies reach the microphone through a simulated hall, "
        "their echo DB louder than the visitor (needs pyroomacoustics: pip install 'orin-avatar[rooms]')",
    )
    run.set_defaults(run=_run)
    status = commands.add_parser("status", help="the running daemon: backends and why, fallbacks, last turns, devices")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(run=_status)
    doctor = commands.add_parser("doctor", help="check everything an installation needs and say what to fix")
    doctor.add_argument("--json", action="store_true", help="print JSON")
    doctor.set_defaults(run=_doctor)
    install = commands.add_parser("install-service", help="install and enable the systemd unit (as root)")
    install.add_argument("--no-enable", action="store_true", help="install only")
    install.set_defaults(run=_install)


def unit_file(name: str) -> bytes:
    """A file of systemd/: package data of device.units when installed (setup.py), the source tree's
    systemd/ in an editable install (setuptools' editable finder does not map that package)."""
    try:
        return importlib.resources.files("device.units").joinpath(name).read_bytes()
    except ModuleNotFoundError:
        return (Path(__file__).resolve().parents[2] / "systemd" / name).read_bytes()


def _run(app: App, args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if args.speaker is not None:
        check_wav_out(args.speaker)  # now, not at SIGTERM when the replies are written
    echo = None
    if args.echo_db is not None:
        if args.mic is None or args.speaker is None:
            raise InputError(
                "--echo-db needs --mic and --speaker: the echo room joins a recorded visit to the replies file"
            )
        echo = EchoPath(echo_db=args.echo_db)  # checks the range now
    return Daemon(app, RunOptions(args.mic, args.speaker, args.camera, args.loop, echo)).run()


def _status(app: App, args: argparse.Namespace) -> int:
    status = read_status()
    if args.json:
        print_json(status)
        return 0
    print(f"orin-avatar {status['state']} (pid {status['pid']}, up {status['uptime_s']:.0f} s): {status['status']}")
    print(f"  conversation {status['conversation']}")
    for name, model in status["models"].items():
        extra = f" - {model['reason']}" if model.get("reason") and model["kind"] == "cpu" else ""
        counts = (
            f" engine {model['engine_calls']}, cpu {model['cpu_calls']}, fallbacks {model['fallbacks']}"
            if "cpu_calls" in model
            else ""
        )
        print(f"  {name:<12} {model['backend']}{extra}{counts}")
    for device, state in status["devices"].items():
        print(f"  {device:<12} {state}")
    if status["hung_stages"]:
        print(f"  HUNG: {', '.join(status['hung_stages'])}")
    print(
        f"  knowledge    {status['knowledge']['intents']} intents; "
        f"last reload: {status['knowledge']['last_reload'] or '-'}"
    )
    bargein, tally = status["bargein"], status["tally"]
    erle = f", echo return loss enhancement {bargein['erle_db']} dB" if bargein["erle_db"] is not None else ""
    print(
        f"  barge-in     {'on' if bargein['enabled'] else 'off'} (echo canceller {bargein['echo_canceller']}{erle}); "
        f"paused {tally.get('barge-in: paused a reply', 0)} (by a sound that was not speech "
        f"{tally.get('barge-in: a sound, not speech', 0)}), cut {tally.get('barge-in: cut a reply', 0)}"
    )
    for turn in status["turns"]:
        print(
            f"  turn {turn['turn']:>3}  {turn['latency_ms'] or '-':>7} ms  "
            f"{turn['intent'] or turn['ignored'] or '-':<15} {turn['transcript']}"
        )
    return 0


def _doctor(app: App, args: argparse.Namespace) -> int:
    checks = run_checks(app)
    if args.json:
        print_json([c.__dict__ for c in checks])
    else:
        for check in checks:
            print(f"[{check.level:<4}] {check.name:<22} {check.detail}")
            if check.fix and check.level != "ok":
                print(f"{'':29}fix: {check.fix}")
    return 1 if any(c.level == "FAIL" for c in checks) else 0


def _install(app: App, args: argparse.Namespace) -> int:
    if shutil.which("systemctl") is None:
        raise OrinAvatarError("systemctl not found: this machine does not run systemd")
    for name, dest in (
        ("orin-avatar.service", UNIT_DIR),
        ("orin-avatar.sysusers", Path("/usr/lib/sysusers.d")),
        ("orin-avatar.tmpfiles", Path("/usr/lib/tmpfiles.d")),
    ):
        target = dest / (name.replace(".sysusers", ".conf").replace(".tmpfiles", ".conf"))
        dest.mkdir(parents=True, exist_ok=True)
        target.write_bytes(unit_file(name))
        print(f"installed {target}")
    commands = [["systemd-sysusers"], ["systemd-tmpfiles", "--create"], ["systemctl", "daemon-reload"]]
    if not args.no_enable:
        commands.append(["systemctl", "enable", "orin-avatar.service"])
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise OrinAvatarError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    print(json.dumps({"installed": True, "enabled": not args.no_enable}))
    print(
        "the unit runs /opt/orin-avatar/.venv/bin/orin-avatar (see README); start it with: systemctl start orin-avatar",
        file=sys.stderr,
    )
    return 0
