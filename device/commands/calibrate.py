"""`orin-avatar calibrate`: make (or `--check`) the INT8 calibration tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engines.errors import InputError

from calibration import TABLES_DIR
from calibration.targets import TARGETS
from device.app import App


def register(commands: argparse._SubParsersAction) -> None:
    calibrate = commands.add_parser("calibrate", help="make INT8 calibration tables and check their accuracy gates")
    calibrate.add_argument("models", nargs="*", metavar="MODEL", help=f"default: all ({', '.join(TARGETS)})")
    calibrate.add_argument(
        "--data",
        type=Path,
        help="a site's own samples: WAV files (speech models), images (face) "
        "or .txt files of sentences (text); default: shipped material",
    )
    calibrate.add_argument(
        "--method",
        choices=["entropy", "percentile", "minmax"],
        help="range method (default: each model's own: min-max for text, percentile for the ASR encoder, "
        "entropy for the rest)",
    )
    calibrate.add_argument(
        "--samples", type=int, help="calibration inputs per model (default: each model's own, 64; 2048 VAD frames)"
    )
    calibrate.add_argument("--out", type=Path, default=TABLES_DIR, help=f"where tables go (default {TABLES_DIR})")
    calibrate.add_argument(
        "--check", action="store_true", help="check the existing tables' gates instead of making new ones"
    )
    calibrate.add_argument(
        "--max-fp16-layers",
        type=int,
        help="weighted layers the sensitivity sweep may keep out of INT8 (default: half of them; 0: no sweep)",
    )
    calibrate.set_defaults(run=_run)


def _run(app: App, args: argparse.Namespace) -> int:
    from calibration.calibrate import calibrate, check

    unknown = sorted(set(args.models) - set(TARGETS))
    if unknown:
        raise InputError(f"unknown model(s) {', '.join(unknown)}; INT8 models are {', '.join(TARGETS)}")
    if args.samples is not None and args.samples < 1:
        raise InputError("--samples must be 1 or more")
    if args.max_fp16_layers is not None and args.max_fp16_layers < 0:
        raise InputError("--max-fp16-layers must be 0 or more")
    store = app.store
    results = []
    for name in args.models or TARGETS:
        print(
            f"{name}: {'checking ' + str(args.out / (name + '.json')) if args.check else 'calibrating'}",
            file=sys.stderr,
            flush=True,
        )
        if args.check:
            results.append(check(name, store, args.out, args.data))
        else:
            results.append(
                calibrate(
                    name,
                    store,
                    args.out,
                    args.method,
                    args.samples,
                    args.data,
                    report=lambda line: print(line, file=sys.stderr, flush=True),
                    max_fp16=args.max_fp16_layers,
                )
            )
    for r in results:
        print(summary(r, args.check))
    return 0 if all(r.passed for r in results) else 1


def summary(result, checked: bool) -> str:
    """A model's INT8 share, its FP16 layers and why, and each renderer's emulated accuracy and output."""
    int8, layers = result.layers
    lines = [
        f"{result.model}: {int8} of {layers} weighted layers in INT8 ({int8 / max(1, layers):.0%}), "
        f"{'pass' if result.passed else 'FAIL'}"
    ]
    for renderer, gate in result.gates.items():
        lines.append(
            f"  {renderer:<8} {gate.metric} = {gate.value:.4f} (needs {gate.threshold}): "
            f"{'pass' if gate.passed else 'FAIL'}; {result.emits[renderer]}"
        )
    for node, fidelity in result.sensitivity.items():
        lines.append(f"  FP16: {node} (alone out of INT8, outputs' fidelity {fidelity:.5f})")
    if result.curve:
        lines.append("  sweep (layers in FP16: tuning value): " + ", ".join(f"{n}: {v:.4f}" for n, v in result.curve))
    if result.why:
        lines.append(f"  {result.why}")
    elif result.written:
        lines.append(f"  {'checked' if checked else 'wrote'} {result.written}")
    return "\n".join(lines)
