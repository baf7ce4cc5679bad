"""`orin-avatar bench models|turn|render|io`: speed and memory, measured (never asserted by timed tests)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engines.errors import InputError
from engines.files import write_atomic

from device.app import App
from device.bench.bargein import ECHO_LEVELS_DB, measure_bargein
from device.bench.hearing import CONDITIONS, HALL, measure_hearing
from device.bench.intents import measure_intents
from device.bench.io import measure_io
from device.bench.models import WARMUP, WORKLOADS, measure_models
from device.bench.pauses import SPLITS, measure_pauses
from device.bench.render import measure_render
from device.bench.soak import measure_soak
from device.bench.turn import (
    measure_turns,
    open_questions,
    plot_report,
    print_comparison,
    print_report,
    site_questions,
    turn_settings,
)
from device.commands.context import print_json
from device.conversation.kb_check import tally_line
from device.conversation.visit import bundled_questions
from device.sound.beamformer import MicArray


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="measure speed and memory")
    kinds = bench.add_subparsers(dest="bench", required=True, metavar="WHAT")

    models = kinds.add_parser("models", help="latency and peak memory of each model on the CPU")
    models.add_argument(
        "names", nargs="*", metavar="MODEL", help=f"models to measure (default all: {', '.join(WORKLOADS)})"
    )
    models.add_argument("--runs", type=int, default=20, help="timed runs per model after warm-up (default 20)")
    models.add_argument("--json", action="store_true", help="print JSON instead of a table")
    models.set_defaults(run=_models)

    turn = kinds.add_parser("turn", help="turn latency per stage (p50/p95/p99) through the real pipeline")
    turn.add_argument(
        "--audio", type=Path, help="directory of WAV files, one visitor question each (default: the bundled visit)"
    )
    turn.add_argument("--repeat", type=int, default=3, help="times each question is asked (default 3)")
    turn.add_argument("--json", type=Path, dest="json_out", metavar="FILE", help="write the report as JSON")
    turn.add_argument(
        "--plot", type=Path, metavar="FILE.png", help="stacked bars of where the time went (needs matplotlib)"
    )
    turn.add_argument(
        "--compare", type=Path, metavar="FILE.json", help="print the ratio of each figure to an earlier report"
    )
    turn.add_argument("--no-cache", action="store_true", help="synthesize every answer (no speech cache)")
    turn.add_argument(
        "--llm",
        metavar="URL",
        default="",
        help="an OpenAI-compatible server (e.g. http://127.0.0.1:8080/v1) that answers what the knowledge "
        "base does not; without --audio the questions are open ones the knowledge base cannot answer",
    )
    turn.set_defaults(run=_turn)

    pauses = kinds.add_parser(
        "pauses", help="end of turn: mid-sentence pauses cut and silence waited, fixed hangover vs model"
    )
    pauses.add_argument(
        "--split",
        choices=SPLITS,
        default="held-apart",
        help="the evaluation split (default held-apart; tune only on 'tuning')",
    )
    pauses.add_argument("--json", action="store_true", help="print JSON, every case included")
    pauses.set_defaults(run=_pauses)

    hearing = kinds.add_parser(
        "hearing", help="word error rate, intents and false utterances in a loud hall, per babble level"
    )
    hearing.add_argument(
        "--split",
        choices=SPLITS,
        default="held-apart",
        help="held-apart (default: only ever measured) or tuning (what settings may be chosen on)",
    )
    hearing.add_argument(
        "--snr",
        type=float,
        action="append",
        metavar="DB",
        help="babble levels to try, dB under the visitor's speech, after the quiet room (default: 20, 10, 5, 0)",
    )
    hearing.add_argument(
        "--questions", type=int, metavar="N", help="only the split's first N questions (a quick look; default: all 22)"
    )
    hearing.add_argument(
        "--array",
        type=int,
        metavar="N",
        help="hear through a circular array of N microphones steered at the visitor's face (default: one microphone)",
    )
    hearing.add_argument(
        "--array-radius-mm",
        type=float,
        default=32.0,
        metavar="MM",
        help="the array's radius (default 32 mm, the size of common 4-microphone USB arrays)",
    )
    hearing.add_argument(
        "--own-span",
        action="store_true",
        help="recognise each question from its own span in the mix (50 ms either side), not from the "
        "endpointer's utterances: what the recogniser and the dialogue do when segmentation is perfect",
    )
    hearing.add_argument(
        "--hall",
        type=int,
        default=HALL,
        metavar="N",
        help=f"which hall: the seed of its room, its talkers' places and their babble (default {HALL}, the "
        "hall of the figures in docs/lab/hearing.md); one hall's figures differ from another's by a "
        "question or two, so a setting is best judged over several",
    )
    hearing.add_argument("--json", action="store_true", help="print JSON, every question included")
    hearing.set_defaults(run=_hearing)

    intents = kinds.add_parser(
        "intents", help="unseen wording: right intents, ask-backs and wrong answers (typed, no LLM)"
    )
    intents.add_argument(
        "--split",
        choices=SPLITS,
        default="held-apart",
        help="held-apart (default: only ever measured) or tuning (what settings may be chosen on)",
    )
    intents.add_argument("--json", action="store_true", help="print JSON, every question included")
    intents.set_defaults(run=_intents)

    render = kinds.add_parser("render", help="avatar fps, CPU per frame and A/V offset")
    render.add_argument("--seconds", type=float, default=10.0, help="how long to render (default 10)")
    render.add_argument(
        "--portrait",
        type=Path,
        metavar="PHOTO",
        help="the portrait style with this photo (default: the settings' style)",
    )
    render.add_argument("--json", action="store_true", help="print JSON")
    render.set_defaults(run=_render)

    soak = kinds.add_parser("soak", help="the daemon for N minutes: memory slope, threads, fds, hung stages, turns")
    soak.add_argument("--minutes", type=float, default=30.0, help="how long (default 30)")
    soak.add_argument("--warmup", type=float, default=5.0, help="minutes left out of the memory slope (default 5)")
    soak.add_argument("--json", action="store_true", help="print JSON")
    soak.set_defaults(run=_soak)

    bargein = kinds.add_parser(
        "bargein",
        help="a visitor talking over the robot through an echo room: time to silence, "
        "self-interruptions, intents, echo cancellation",
    )
    bargein.add_argument(
        "--interruptions", type=int, default=10, help="interrupted replies per echo level (default 10)"
    )
    bargein.add_argument("--quiet", type=int, default=10, help="replies nobody talks over, per echo level (default 10)")
    bargein.add_argument(
        "--backchannels", type=int, default=3, help='replies with an "mm-hm" over them, per level (default 3)'
    )
    bargein.add_argument(
        "--paused",
        type=int,
        default=4,
        help="replies with a question with a mid-sentence pause said over them, per level (default 4)",
    )
    bargein.add_argument(
        "--pause-split",
        choices=SPLITS,
        default="held-apart",
        help="the end-of-turn set's split the paused questions come from (default held-apart; tune on tuning)",
    )
    bargein.add_argument(
        "--echo-db",
        type=float,
        action="append",
        dest="levels",
        metavar="DB",
        help="echo level over the visitor's speech; repeat for several (default "
        + ", ".join(f"{level:+.0f}" for level in ECHO_LEVELS_DB)
        + ")",
    )
    bargein.add_argument("--json", action="store_true", help="print JSON, every case included")
    bargein.set_defaults(run=_bargein)

    io = kinds.add_parser("io", help="microphone-to-pipeline and camera-to-gaze latency")
    io.add_argument("--seconds", type=float, default=10.0)
    io.add_argument(
        "--camera", help="camera source (default: [camera] source, else a clip made from the bundled photo)"
    )
    io.add_argument("--json", action="store_true", help="print JSON")
    io.set_defaults(run=_io)


def _models(app: App, args: argparse.Namespace) -> int:
    results = measure_models(app, args.names, args.runs)
    if args.json:
        print_json({"threads": app.threads, "backend": "onnxruntime-cpu", "models": results})
        return 0
    print(f"{'model':<12} {'input':<34} {'p50 ms':>8} {'p95 ms':>8} {'peak RSS MB':>12}")
    for r in results:
        print(
            f"{r['model']:<12} {r['input']:<34} {r['latency_ms']['p50']:>8.2f} "
            f"{r['latency_ms']['p95']:>8.2f} {r['peak_rss_mb']:>12.1f}"
        )
    print(f"(ONNX Runtime CPU, {app.threads} thread(s) per model, {args.runs} runs after {WARMUP} warm-up)")
    return 0


def _turn(app: App, args: argparse.Namespace) -> int:
    for path in (args.json_out, args.plot):  # checked before a run of minutes, not after it
        if path is not None and not path.parent.is_dir():
            raise InputError(f"{path}: its directory {path.parent} does not exist")
    earlier = _read_report(args.compare) if args.compare else None
    settings = turn_settings(app, cache=not args.no_cache, llm_url=args.llm)
    questions = site_questions(args.audio) if args.audio else open_questions(app) if args.llm else bundled_questions()
    report = measure_turns(app, settings, questions, args.repeat)
    print_report(report)
    if args.json_out:
        write_atomic(args.json_out, (json.dumps(report, indent=2) + "\n").encode())
        print(f"wrote {args.json_out}")
    if args.plot:
        plot_report(report, args.plot)
    if earlier is not None:
        print_comparison(report, earlier)
    return 0


def _read_report(path: Path) -> dict:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"--compare {path}: not a readable bench turn report ({exc})") from None
    if not isinstance(report, dict) or "overall_ms" not in report:
        raise InputError(f"--compare {path}: not a bench turn report (no overall_ms); write one with --json")
    return report


def _pauses(app: App, args: argparse.Namespace) -> int:
    report = measure_pauses(app, args.split)
    if args.json:
        print_json(report)
        return 0
    print(
        f"{args.split} split: {report['fixed_hangover']['paused']} questions with a 600-1000 ms mid-sentence pause, "
        f"{report['fixed_hangover']['straight']} said straight through; waiting after open words: "
        f"{'on' if report['settings']['wait_after_open_words'] else 'off'}; ending on known questions: "
        f"{'on' if report['settings']['end_on_known_question'] else 'off'}"
    )
    for name in ("fixed_hangover", "end_of_turn"):
        r = report[name]
        rejoined = (
            f" ({r['cut_rejoined']['paused']} heard whole when the visitor went on)"
            if report["settings"]["rejoin_within_ms"]
            else ""
        )
        print(
            f"  {name:<15} paused cut {r['paused_cut']}/{r['paused']}{rejoined}; straight waiting over "
            f"{r['straight_waiting_over_ms']['limit']:.0f} ms "
            f"{r['straight_waiting_over_ms']['count']}/{r['straight']}; "
            f"wait p50 {r['straight_wait_ms']['p50']} ms, p95 {r['straight_wait_ms']['p95']} ms; "
            f"model p50 {r['model_ms']['p50']} ms"
        )
    return 0


def _hearing(app: App, args: argparse.Namespace) -> int:
    if args.array is not None and (args.array < 2 or args.array_radius_mm <= 0):
        raise InputError(
            f"--array {args.array} --array-radius-mm {args.array_radius_mm:g}: an array needs 2 or more "
            "microphones on a circle of a radius over 0 mm (e.g. --array 4 --array-radius-mm 32)"
        )
    array = None if args.array is None else MicArray.circular(args.array, args.array_radius_mm / 1000)
    report = measure_hearing(
        app, args.split, (None, *args.snr) if args.snr else CONDITIONS, args.questions, array, args.own_span, args.hall
    )
    if args.json:
        print_json(report)
        return 0
    heard_by = (
        "one microphone"
        if array is None
        else f"{array.count} microphones {args.array_radius_mm:g} mm from the centre, steered"
    )
    segmented = (
        "; each question recognised from its own span (no utterance of the babble around it; the minute "
        "of babble alone is the endpointer's)"
        if args.own_span
        else ""
    )
    print(
        f"{args.split} split, {report['questions']} questions in hall {args.hall} (RT60 0.5 s, six other talkers), "
        f"{heard_by}{segmented}:"
    )
    for c in report["conditions"]:
        name = "quiet room" if c["snr_db"] is None else f"babble {c['snr_db']:g} dB"
        print(
            f"  {name:<14} WER {c['wer']:.2f}, intents {c['intent_accuracy']:.0%} (or asked back right "
            f"{c['right_or_asked']:.0%}, wrong {c['wrong']}), heard {c['heard']}/{report['questions']} "
            f"({c['rejoined']} from pieces rejoined), "
            f"utterances started by babble {c['false_utterances']}, "
            f"utterance ended {c['ended_after_question_ms_p50']} ms "
            "after the question (p50)"
        )
    b = report["babble_only"]
    print(f"  babble alone at the 10 dB level: {b['utterances']} utterances in {b['seconds']:.0f} s")
    return 0


def _intents(app: App, args: argparse.Namespace) -> int:
    report = measure_intents(app, args.split)
    if args.json:
        print_json(report)
        return 0
    print(f"{args.split} split, threshold {report['threshold']}, confident above {report['confident_threshold']}:")
    for name in ("answerable", "not_answerable"):
        t = report[name]
        print(
            f"  {name.replace('_', ' '):<15} {t['questions']:>3}: {tally_line(t)}; "
            f"right or asked back right {t['right_or_asked']:.1%}"
        )
    for r in report["questions"]:
        if r["outcome"] != "right":
            print(
                f"    {r['outcome']:<16} {r['score']:.2f} {r['intent']:<15} "
                f'"{r["question"]}" (expected {r["expected"]})'
            )
    return 0


def _render(app: App, args: argparse.Namespace) -> int:
    report = measure_render(app, args.seconds, args.portrait)
    if args.json:
        print_json(report)
        return 0
    print(
        f"{report['style']} at {report['width']}x{report['height']} to {report['display']}: {report['fps']:.1f} fps "
        f"(target {report['target_fps']:.0f}), {report['cpu_ms_per_frame']:.2f} ms CPU per frame, "
        f"{report['cpu_percent_of_one_core']:.1f}% of one core; mouth-to-sound offset "
        f"{report['av_offset_ms']:+.0f} ms (correlation {report['av_correlation']:.2f})"
    )
    return 0


def _bargein(app: App, args: argparse.Namespace) -> int:
    report = measure_bargein(
        app,
        args.interruptions,
        args.quiet,
        args.backchannels,
        tuple(args.levels or ECHO_LEVELS_DB),
        paused=args.paused,
        pause_split=args.pause_split,
    )
    if args.json:
        print_json(report)
        return 0
    print(
        f"{'echo':>7} {'silent p50':>10} {'p95':>6} {'mouth after sound p95':>22} {'same intent':>12} "
        f"{'self-interrupted':>17} {'ERLE dB':>8} {'mm-hm went on':>14} {'held p50':>9} {'paused heard whole':>19}"
    )
    for level, r in report["levels"].items():
        silent, mouth = r["speaker_silent_after_onset_ms"] or {}, r["mouth_closed_after_sound_ms"] or {}
        print(
            f"{level:>7} {silent.get('p50', '-'):>10} {silent.get('p95', '-'):>6} {mouth.get('p95', '-'):>22} "
            f"{r['same_intent']:>12} {r['self_interruptions']:>17} "
            f"{r['erle_db'] if r['erle_db'] is not None else '-':>8} "
            f"{r['backchannels_went_on']:>14} {(r['backchannel_held_ms'] or {}).get('p50', '-'):>9} "
            f"{r['paused_heard_whole']:>19}" + (f"  ({r['not_stopped']} never went silent)" if r["not_stopped"] else "")
        )
    print(
        "(ms from the interrupting speech's onset to the speaker's last sample, on the microphone's clock; "
        "mouth: its first frame after the pause, against the sound's end)"
    )
    return 0


def _io(app: App, args: argparse.Namespace) -> int:
    if args.seconds <= 0:
        raise InputError("--seconds must be above 0")
    report = measure_io(app, args.seconds, args.camera)
    if args.json:
        print_json(report)
        return 0
    for name, result in report.items():
        print(f"{name}: {result}")
    return 0


def _soak(app: App, args: argparse.Namespace) -> int:
    report = measure_soak(app, args.minutes, args.warmup)
    if args.json:
        print_json(report)
        return 0
    rss = report["rss_mb"]
    print(
        f"{report['minutes']:.0f} min, {report['samples']} samples: RSS {rss['first']:.1f} -> {rss['last']:.1f} MB, "
        f"slope after {report['warmup_minutes']:.0f} min {rss['slope_after_warmup_mb_per_min']} MB/min; threads "
        f"{report['threads']}, fds {report['fds']}; hung stages {report['hung_stages_seen'] or 'none'}; turns "
        f"{report['turns']}; stopped in {report['stop_seconds']} s (exit {report['exit_code']})"
    )
    return 0
