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
    calibrate.add_argument("--data", type=Path, help="a site's own samples: WAV files (speech models), images (face) "
                                                     "or .txt files of sentences (text); default: shipped material")
    calibrate.add_argument("--method", choices=["entropy", "percentile", "minmax"],
                           help="range method (default: each model's own, entropy except text's minmax)")
    calibrate.add_argument("--samples", type=int, default=64, help="calibration inputs per model (default 64)")
    calibrate.add_argument("--out", type=Path, default=TABLES_DIR, help=f"where tables go (default {TABLES_DIR})")
    calibrate.add_argument("--check", action="store_true", help="check the existing tables' gates instead of making new ones")
    calibrate.add_argument("--max-fp32-layers", type=int, default=12,
                           help="layers the sensitivity sweep may keep out of INT8 (default 12; 0: no sweep)")
    calibrate.set_defaults(run=_run)


def _run(app: App, args: argparse.Namespace) -> int:
    from calibration.calibrate import calibrate, check

    unknown = sorted(set(args.models) - set(TARGETS))
    if unknown:
        raise InputError(f"unknown model(s) {', '.join(unknown)}; INT8 models are {', '.join(TARGETS)}")
    if args.samples < 1:
        raise InputError("--samples must be 1 or more")
    store = app.store
    results = []
    for name in args.models or TARGETS:
        method = args.method or TARGETS[name].method
        print(f"{name}: {'checking ' + str(args.out / (name + '.json')) if args.check else 'calibrating (' + method + ')'}",
              file=sys.stderr, flush=True)
        if args.check:
            results.append(check(name, store, args.out, args.data))
        else:
            results.append(calibrate(name, store, args.out, method, args.samples, args.data,
                                     report=lambda line: print(line, file=sys.stderr, flush=True),
                                     max_fp32=args.max_fp32_layers))
    print(f"{'model':<12} {'gate':<52} {'value':>9} {'needs':<18} {'result':<6} {'FP32 layers':>11} {'FP32 ms':>8} {'INT8 ms':>8}")
    for r in results:
        kept = len(r.table.fp32_nodes) if r.table else "-"
        print(f"{r.model:<12} {r.gate.metric[:52]:<52} {r.gate.value:>9.4f} {r.gate.threshold:<18} "
              f"{'pass' if r.gate.passed else 'FAIL':<6} {kept:>11} {r.latency_ms['fp32_ms']:>8} {r.latency_ms['int8_ms']:>8}")
    for r in results:
        if r.why:
            print(f"{r.model}: {r.why}")
        elif r.written and not args.check:
            print(f"{r.model}: wrote {r.written}")
    return 0 if all(r.gate.passed for r in results) else 1
