"""Imports point down: every module of the product imports only from its own layer or the ones below.

The order, bottom to top, written once here (docs/developer/architecture.md draws it):
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

LAYERS = (
    # the model runtime: errors, the Runner seam, model specifications (and the audio format), the
    # store, TensorRT, the calibration-table format and its renderings
    ("engines",),
    # shared vocabulary of the device: messages between stages, TOML reading, settings, audio files
    ("device", "device.messages", "device.toml_file", "device.settings", "device.audio_file", "device.bundled"),
    ("device.models",),  # the model wrappers
    ("device.sound", "device.vision", "device.avatar"),  # devices and the avatar
    ("device.conversation",),  # the turn loop, dialogue, speech out
    ("calibration",),  # targets, data and gates use the wrappers and the dialogue's built-ins
    ("device.app",),  # the application context that puts it together
    ("device.service", "device.bench"),  # the daemon, the benchmarks
    ("device.commands", "device.cli", "device.__main__"),  # the command line, the only place argparse is known
)
PACKAGES = ("engines", "device", "calibration")


def layer_of(module: str) -> int:
    """The index of the most specific layer prefix that names `module`."""
    best, depth = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = index, len(prefix)
    assert best >= 0, f"{module} is in no layer of tests/test_layers.py"
    return best


def product_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(path: Path, module: str) -> set[str]:
    """Product modules imported anywhere in the file (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                base = ".".join(module.split(".")[:-node.level] + [node.module])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    modules = product_modules()
    return {name for name in found if name in modules}


def test_imports_point_down():
    upward = []
    for module, path in sorted(product_modules().items()):
        mine = layer_of(module)
        for imported in imports_of(path, module):
            if layer_of(imported) > mine:
                upward.append(f"{module} (layer {mine}) imports {imported} (layer {layer_of(imported)})")
    assert not upward, "imports that point up:\n" + "\n".join(upward)


def test_only_commands_know_argparse():
    knowing = [m for m, p in product_modules().items() if "argparse" in {n.split(".")[0] for n in _all_imports(p)}]
    assert all(m.startswith("device.commands") or m == "device.cli" for m in knowing), knowing


def test_every_module_has_a_layer():
    for module in product_modules():
        layer_of(module)


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names
