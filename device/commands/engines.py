"""`orin-avatar build` and `orin-avatar engines list`: TensorRT engines for the store's models."""

from __future__ import annotations

import argparse
import sys

from engines import tensorrt_support
from engines.engine_manager import EngineManager
from engines.errors import InputError
from engines.model_specs import MODELS
from engines.platform import probe_platform
from engines.store.model_store import state_home

from device.app import App
from device.commands.context import print_json


def register(commands: argparse._SubParsersAction) -> None:
    build = commands.add_parser("build", help="build (or find) and validate TensorRT engines for the models")
    build.add_argument("models", nargs="*", metavar="MODEL", help=f"default: all ({', '.join(MODELS)})")
    build.add_argument(
        "--precision", choices=["int8", "fp16", "fp32"], help="one precision instead of each model's ladder"
    )
    build.add_argument("--dla", type=int, choices=[0, 1], help="build for this DLA core (GPU fallback for the rest)")
    build.add_argument("--force", action="store_true", help="rebuild even if a valid engine is cached")
    build.set_defaults(run=_build)
    engines = commands.add_parser("engines", help="inspect the engine cache")
    actions = engines.add_subparsers(dest="engines_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="each model's engine, key, precision and status")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_list)
    plan = actions.add_parser(
        "plan", help="what a TensorRT release would build for each model, and why (no GPU needed)"
    )
    plan.add_argument(
        "--tensorrt", choices=list(tensorrt_support.RELEASES), help="the TensorRT release (default: the installed one)"
    )
    plan.add_argument("--dla", action="store_true", help="plan for the DLA ([engines] dla_core 0 or 1)")
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(run=_plan)


def manager_of(app: App) -> EngineManager:
    return EngineManager(app.store, state_home() / "engines", app.settings.engines, app.tables)


def _build(app: App, args: argparse.Namespace) -> int:
    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        raise InputError(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    manager = manager_of(app)
    if manager.unavailable:
        print(f"{manager.unavailable}\nNo engines built: every model runs on the CPU (ONNX Runtime).")
        return 0
    failed = 0
    for name in args.models or MODELS:
        outcome = manager.ensure(
            name, args.precision, args.dla, args.force, report=lambda line: print(line, file=sys.stderr, flush=True)
        )
        if outcome.engine is None:
            failed += 1
            print(f"{name}: CPU ({'; '.join(outcome.reasons)})")
        else:
            print(f"{name}: TensorRT {outcome.precision} engine {outcome.engine}")
    return 1 if failed and args.models else 0


def _list(app: App, args: argparse.Namespace) -> int:
    manager = manager_of(app)
    rows = [
        {
            "model": r.model,
            "key": r.key,
            "precision": r.precision,
            "status": r.status,
            "reason": r.reason,
            "build_seconds": r.build_seconds,
            "validation": r.validation,
        }
        for r in manager.cache.records()
    ]
    platform = manager.platform.as_dict()
    if args.json:
        print_json({"platform": platform, "tensorrt_unavailable": manager.unavailable, "engines": rows})
        return 0
    print(
        f"TensorRT: {platform['tensorrt'] or 'absent'}; GPU: {platform['gpu'] or 'none'}; "
        f"engine cache: {manager.cache.root}"
    )
    if manager.unavailable:
        print(f"{manager.unavailable}\nEvery model runs on the CPU (ONNX Runtime).")
    for name, spec in MODELS.items():
        mine = [r for r in rows if r["model"] == spec.model]
        if spec.cpu_reason:
            print(f"  {name:<12} CPU: {spec.cpu_reason}")
        elif not mine:
            print(f"  {name:<12} no engine {'(CPU)' if manager.unavailable else 'yet: orin-avatar build ' + name}")
        for r in mine:
            detail = f"cosine {r['validation'].get('worst_cosine')}" if r["status"] == "valid" else r["reason"]
            print(f"  {name:<12} {r['precision']:<5} {r['status']:<6} {r['key']}  {detail}")
    return 0


def _plan(app: App, args: argparse.Namespace) -> int:
    from engines.plan import plan

    if args.tensorrt:
        version = tensorrt_support.RELEASES[args.tensorrt]
    else:
        version = probe_platform().tensorrt
        if version is None:
            raise InputError(
                f"TensorRT is not installed here; name a release: --tensorrt {'|'.join(tensorrt_support.RELEASES)}"
            )
    plans = plan(app.store, app.tables, version, dla=args.dla or app.settings.engines.dla_core >= 0)
    if args.json:
        print_json({"tensorrt": version, "models": [p.as_dict() for p in plans]})
        return 0
    print(f"TensorRT {version} (operators: onnx-tensorrt {tensorrt_support.operator_table(version)} table)")
    for p in plans:
        ladder = " -> ".join(r.precision + (" (refused)" if r.refused else "") for r in p.rungs) or "-"
        print(f"  {p.model:<12} runs on {p.runs_on:<16} ladder {ladder}")
        if p.reason:
            print(f"  {'':<12} why: {p.reason}")
        if p.dla != "yes" and p.rungs and (args.dla or app.settings.engines.dla_core >= 0):
            print(f"  {'':<12} DLA: {p.dla}")
        for note in p.notes:
            print(f"  {'':<12} note: {note}")
    return 0
