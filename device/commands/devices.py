"""`orin-avatar devices`: the microphones, speakers and cameras this machine has."""

from __future__ import annotations

import argparse
import glob

from device.app import App
from device.commands.context import print_json


def register(commands: argparse._SubParsersAction) -> None:
    devices = commands.add_parser("devices", help="list audio inputs and outputs, and cameras, with their formats")
    devices.add_argument("--json", action="store_true", help="print JSON")
    devices.set_defaults(run=_run)


def cameras() -> list[dict]:
    import cv2

    found = []
    for path in sorted(glob.glob("/dev/video*")):
        capture = cv2.VideoCapture(path, cv2.CAP_V4L2)
        if capture.isOpened():
            found.append(
                {
                    "path": path,
                    "width": int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
                    "height": int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
                    "fps": capture.get(cv2.CAP_PROP_FPS),
                }
            )
        capture.release()
    return found


def _run(app: App, args: argparse.Namespace) -> int:
    from device.sound.devices import list_devices

    sound = list_devices()
    inputs = [d.__dict__ for d in sound if d.inputs]
    outputs = [d.__dict__ for d in sound if d.outputs]
    video = cameras()
    if args.json:
        print_json({"inputs": inputs, "outputs": outputs, "cameras": video})
        return 0
    for title, rows, channels in (("microphones", inputs, "inputs"), ("speakers", outputs, "outputs")):
        print(f"{title}:" if rows else f"{title}: none (PyAudio sees no audio {title[:-1]} on this machine)")
        for d in rows:
            print(f"  {d['index']:>3}  {d['name']}  ({d[channels]} ch, {d['rate']} Hz)")
    print("cameras:" if video else "cameras: none (no /dev/video* device opens)")
    for c in video:
        print(f"  {c['path']}  {c['width']}x{c['height']} at {c['fps']:.0f} fps")
    if not (inputs or outputs or video):
        print(
            "Nothing to capture or play with: plug in the USB microphone, speaker and camera; "
            "set [audio] and [camera] in /etc/orin-avatar/orin-avatar.toml."
        )
    return 0
