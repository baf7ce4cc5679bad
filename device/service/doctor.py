"""`orin-avatar doctor`: everything an integrator needs to know about this installation, with fixes."""

from __future__ import annotations

import glob
import grp
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from engines.backends import OPTIMIZED_DIR
from engines.calibration_table import read_table
from engines.errors import OrinAvatarError
from engines.onnxrt_runner import digest_of, optimized_intact
from engines.platform import probe_platform
from engines.store.model_store import state_home, verify_entry

from device.app import App
from device.avatar.display import x_display_reachable
from device.service.status_socket import read_status
from device.sound.devices import DeviceError, check_array_channels, choose, list_devices
from device.sound.echo_canceller import Aec3, EchoCancellerError

SERVICE_USER = "orin-avatar"
SERVICE_GROUPS = ("audio", "video", "render")


@dataclass
class Check:
    name: str
    level: str  # ok | WARN | FAIL
    detail: str
    fix: str = ""


def run_checks(app: App) -> list[Check]:
    checks = [_settings(app)]
    checks += _platform()
    checks += [_state_directory(), _store(app), _tables(app), _engines(), _audio(), _echo_canceller(app)]
    checks += _microphone_array(app)
    checks += [_video(), _display(), _service_user(), _daemon()]
    return checks


def _settings(app: App) -> Check:
    try:
        app.settings
        return Check("settings", "ok", str(app.config or "defaults (+ /etc/orin-avatar/orin-avatar.toml if present)"))
    except OrinAvatarError as exc:
        return Check("settings", "FAIL", str(exc), "fix the file named above")


def _platform() -> list[Check]:
    platform = probe_platform()
    l4t = platform.l4t
    checks = [
        Check(
            "jetpack/l4t",
            "ok" if l4t else "WARN",
            f"L4T {l4t}" if l4t else "not a Jetson (no /etc/nv_tegra_release)",
            "run on a Jetson AGX Orin with JetPack 6 for TensorRT engines",
        )
    ]
    if platform.usable:
        checks.append(
            Check("tensorrt", "ok", f"TensorRT {platform.tensorrt}, CUDA {platform.cuda}, driver {platform.driver}")
        )
        checks.append(
            Check(
                "gpu", "ok", f"{platform.gpu} (compute {platform.compute_capability}), {platform.dla_cores} DLA core(s)"
            )
        )
    else:
        checks.append(
            Check(
                "tensorrt",
                "WARN",
                f"{platform.problem} Every model runs on the CPU.",
                "on a Jetson: sudo apt install python3-libnvinfer; .venv/bin/pip install -e .[jetson]",
            )
        )
    nvpmodel = shutil.which("nvpmodel")
    if nvpmodel:
        mode = subprocess.run([nvpmodel, "-q"], capture_output=True, text=True).stdout.strip().replace("\n", " ")
        checks.append(
            Check(
                "power mode",
                "ok" if "MAXN" in mode else "WARN",
                mode or "unknown",
                "sudo nvpmodel -m 0 (MAXN) for the fastest answers",
            )
        )
    return checks


def _store(app: App) -> Check:
    try:
        store = app.store
        bad = [name for name, entry in store.entries().items() if verify_entry(store.root / name, entry)]
    except OrinAvatarError as exc:
        return Check("model store", "FAIL", str(exc), "orin-avatar models sync")
    if bad:
        return Check("model store", "FAIL", f"{len(bad)} file(s) fail verification: {', '.join(bad)}", store.sync_hint)
    graphs = [g for g in sorted((store.root / OPTIMIZED_DIR).glob("*.onnx")) if digest_of(g).exists()]
    changed = [graph.name for graph in graphs if not optimized_intact(graph)]  # (one kept without a sha256: older)
    graphs_said = f", {len(graphs) - len(changed)} optimized graphs intact" if graphs else ""
    if changed:  # each is made again at its next load; say it, since one changed on disk is a question
        return Check(
            "model store",
            "WARN",
            f"{len(changed)} optimized graph(s) unlike the sha256 kept with them: {', '.join(changed)}",
            "nothing to do: each is made again from its verified model at the next start",
        )
    return Check("model store", "ok", f"{store.root}: {len(store.entries())} files verified{graphs_said}")


def _tables(app: App) -> Check:
    try:
        store = app.store
        tables = sorted(app.tables.glob("*.json"))
        for path in tables:
            table = read_table(path)
            read_table(path, store.entries()[table.model].sha256)
    except (OrinAvatarError, KeyError) as exc:
        return Check("calibration tables", "FAIL", str(exc), "orin-avatar calibrate (or reinstall orin-avatar)")
    return Check(
        "calibration tables",
        "ok" if tables else "WARN",
        f"{len(tables)} table(s): {', '.join(p.stem for p in tables)}"
        if tables
        else "none: every model builds in FP16",
        "orin-avatar calibrate",
    )


def _state_directory() -> Check:
    """Engines, optimized graphs, the daemon's lock and socket are written here: a read-only one stops `run`."""
    state = state_home()
    existing = next(p for p in (state, *state.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        owner = f"{existing} (owner {_user_name(existing.stat().st_uid)})"
        return Check(
            "state directory",
            "FAIL",
            f"{state} cannot be written by {_user_name(os.getuid())}: {owner} is read-only for it",
            "run as the service user, or set ORIN_AVATAR_HOME to a writable folder",
        )
    return Check("state directory", "ok", f"{state} is writable")


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # no passwd entry (a container's uid)
        return f"uid {uid}"


def _engines() -> Check:
    from engines.engine_cache import EngineCache

    records = EngineCache(state_home() / "engines").records()
    failed = [f"{r.model} {r.precision}: {r.reason}" for r in records if r.status != "valid"]
    valid = [f"{r.model} {r.precision}" for r in records if r.status == "valid"]
    detail = f"{len(valid)} valid ({', '.join(valid) or 'none'})" + (
        f"; {len(failed)} failed: {'; '.join(failed)}" if failed else ""
    )
    return Check("engines", "ok" if valid or not probe_platform().usable else "WARN", detail, "orin-avatar build")


def _audio() -> Check:
    cards = Path("/proc/asound/cards")
    text = cards.read_text().strip() if cards.is_file() else ""
    if not text or "no soundcards" in text:
        return Check(
            "audio devices",
            "FAIL",
            "no sound card (/proc/asound/cards)",
            "plug in the USB microphone and speaker; check 'arecord -l' and 'aplay -l'",
        )
    return Check("audio devices", "ok", " / ".join(line.strip() for line in text.splitlines()[::2]))


def _echo_canceller(app: App) -> Check:
    """Barge-in needs the WebRTC library built at install; without it the daemon runs, deaf while it speaks."""
    try:
        bargein = app.settings.bargein
    except OrinAvatarError:
        return Check("echo canceller", "WARN", "the settings do not load (see above)")
    if bargein.echo_canceller == "none":
        return Check(
            "echo canceller",
            "WARN",
            'off ([bargein] echo_canceller = "none"): no barge-in while the robot speaks',
            "only with a headset or a microphone that does not hear the speaker",
        )
    try:
        Aec3(bargein.echo_tail_ms)
    except EchoCancellerError as exc:
        return Check("echo canceller", "FAIL", f"{exc}", "pip install -e . (builds it), then restart the daemon")
    return Check("echo canceller", "ok", f"WebRTC AEC3, linear filter {bargein.echo_tail_ms} ms")


def _microphone_array(app: App) -> list[Check]:
    """With `[audio] array_channels` set: the input device has those channels (else the daemon will not start)."""
    try:
        audio = app.settings.audio
    except OrinAvatarError:
        return []  # the settings check says why
    if not audio.array_channels:
        return []
    try:
        device = choose(list_devices(), audio.input_device, "input")
        check_array_channels(device, audio.array_channels)
    except DeviceError as exc:
        return [
            Check("microphone array", "FAIL", str(exc), "set [audio] input_device and array_channels to the array's")
        ]
    return [
        Check(
            "microphone array",
            "ok",
            f"{len(audio.array_channels)} microphones on channels {list(audio.array_channels)} "
            f"of {device.name} ({device.inputs} input channels), {audio.array_radius_mm:g} mm from the centre",
        )
    ]


def _video() -> Check:
    cameras = sorted(glob.glob("/dev/video*"))
    if not cameras:
        return Check(
            "cameras",
            "WARN",
            "no /dev/video* device: the robot cannot see visitors",
            "plug in the camera; check 'v4l2-ctl --list-devices'",
        )
    return Check("cameras", "ok", ", ".join(cameras))


def _display() -> Check:
    display = os.environ.get("DISPLAY")
    if not display:
        return Check(
            "display",
            "WARN",
            "DISPLAY is not set: the avatar cannot be shown",
            "run in the kiosk's X session, or set Environment=DISPLAY=:0 in the unit",
        )
    if not x_display_reachable(display):
        return Check(
            "display",
            "WARN",
            f"DISPLAY={display} but no X server answers there",
            "start the kiosk's X session (or Xvfb for testing)",
        )
    return Check("display", "ok", f"DISPLAY={display}")


def _service_user() -> Check:
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        return Check("service user", "WARN", f"no user {SERVICE_USER}", "make install (installs the sysusers.d entry)")
    missing = [g for g in SERVICE_GROUPS if _group_has(g, SERVICE_USER) is False]
    if missing:
        return Check(
            "service user",
            "FAIL",
            f"{SERVICE_USER} is not in group(s) {', '.join(missing)}",
            f"sudo usermod -aG {','.join(missing)} {SERVICE_USER}",
        )
    return Check("service user", "ok", f"{SERVICE_USER} in {', '.join(SERVICE_GROUPS)}")


def _group_has(group: str, user: str) -> bool | None:
    try:
        return user in grp.getgrnam(group).gr_mem
    except KeyError:
        return None  # the group does not exist on this system


def _daemon() -> Check:
    try:
        status = read_status(timeout=2)
    except OrinAvatarError as exc:
        return Check("daemon", "WARN", str(exc), "systemctl start orin-avatar")
    cpu = [n for n, m in status["models"].items() if m["kind"] == "cpu"]
    level = "FAIL" if status["hung_stages"] else "ok"
    return Check(
        "daemon",
        level,
        f"{status['state']}, pid {status['pid']}, up {status['uptime_s']:.0f} s; "
        f"{len(status['models']) - len(cpu)} model(s) on TensorRT, {len(cpu)} on the CPU"
        + (f"; hung: {', '.join(status['hung_stages'])}" if status["hung_stages"] else ""),
        "journalctl -u orin-avatar -e",
    )
