"""`orin-avatar avatar check PHOTO` and `orin-avatar avatar preview [PHOTO] --out FILE.mp4`: a portrait, tried."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from engines.errors import InputError

from device.app import App
from device.avatar.display import VideoFileSink
from device.avatar.photo_check import check_photo
from device.avatar.playback import render_replies
from device.avatar.portrait import read_photo
from device.avatar.styles import open_style
from device.commands.context import print_json
from device.conversation.visemes import spoken_with_visemes
from device.conversation.visit import bundled_questions
from device.models import catalog


def register(commands: argparse._SubParsersAction) -> None:
    avatar = commands.add_parser("avatar", help="check a portrait photo, or preview the avatar with it")
    kinds = avatar.add_subparsers(dest="kind", required=True, metavar="KIND")
    check = kinds.add_parser(
        "check", help="whether a photo will work as the portrait (exit 1 if not, with the reasons)"
    )
    check.add_argument("photo", type=Path)
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(run=_check)
    preview = kinds.add_parser("preview", help="a video of the avatar speaking the bundled visit's answers")
    preview.add_argument("photo", type=Path, nargs="?", help="a portrait photo (default: the configured style)")
    preview.add_argument("--out", type=Path, required=True, help="the video to write (.mp4 or .mkv)")
    preview.add_argument("--answers", type=int, help="only the first N answers (default: all)")
    preview.set_defaults(run=_preview)


def _check(app: App, args: argparse.Namespace) -> int:
    verdict = check_photo(read_photo(args.photo), app.store, app.threads)
    if args.json:
        print_json(
            {
                "photo": str(args.photo),
                "usable": verdict.usable,
                "problems": verdict.problems,
                "advice": verdict.advice,
                "measures": verdict.measures,
            }
        )
    else:
        print(f"{args.photo}: {'usable' if verdict.usable else 'NOT usable'}")
        for line in verdict.problems:
            print(f"  problem: {line}")
        for line in verdict.advice:
            print(f"  advice: {line}")
    return 0 if verdict.usable else 1


def _preview(app: App, args: argparse.Namespace) -> int:
    if args.out.suffix.lower() not in (".mp4", ".mkv"):
        raise InputError(f"--out {args.out}: give a .mp4 or .mkv file")
    if args.answers is not None and args.answers < 1:
        raise InputError("--answers must be 1 or more")
    settings = app.settings.avatar
    if args.photo is not None:
        settings = dataclasses.replace(settings, style="portrait", portrait=str(args.photo))
    renderer = open_style(settings, app.store, app.threads)
    print("answering the bundled visit's questions...", file=sys.stderr, flush=True)
    dialogue, tts = app.dialogue(), catalog.load_tts(app.store, app.threads)
    replies = []
    for question in bundled_questions()[: args.answers]:
        replies.append(
            (*spoken_with_visemes(tts, " ".join(dialogue.answer(question.text).sentences())), tts.sample_rate)
        )
    sink = VideoFileSink(args.out, settings.width, settings.height, settings.fps)
    print(f"rendering {len(replies)} answers...", file=sys.stderr, flush=True)
    written = sink.close(render_replies(replies, renderer, sink, settings.fps), tts.sample_rate)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
