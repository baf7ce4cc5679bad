"""Imports point down: every module of the product imports only from its own layer or the ones below,
across a layer only where PEERS allows it, without cycles, relative or dynamic imports, and from no
top-level package the map does not know. Each rule is shown failing on a small tree of its own.

The order, bottom to top, written once here (docs/developer/architecture.md draws it). A name matches
that module exactly; `name.*` matches what is inside it.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

from tests.conftest import REPO

LAYERS = (
    # the model runtime: errors, the Runner seam, model specifications (and the audio format), the
    # store, TensorRT, the calibration-table format and its renderings
    ("engines", "engines.*"),
    # shared vocabulary of the device: messages between stages, TOML reading, settings, audio files
    ("device", "device.messages", "device.toml_file", "device.settings", "device.audio_file", "device.bundled"),
    ("device.models", "device.models.*"),  # the model wrappers
    ("device.sound", "device.sound.*", "device.vision", "device.vision.*", "device.avatar", "device.avatar.*"),
    ("device.conversation", "device.conversation.*"),  # the turn loop, dialogue, speech out
    ("calibration", "calibration.*"),  # targets, data and gates use the wrappers and the dialogue's built-ins
    ("device.app",),  # the application context that puts it together
    ("device.service", "device.service.*", "device.bench", "device.bench.*"),  # the daemon, the benchmarks
    ("device.commands", "device.commands.*", "device.cli", "device.__main__"),  # the only place argparse is known
)
PACKAGES = ("engines", "device", "calibration")
NOT_PACKAGES = {"tests", "scripts", "docs", "systemd", "out", "build"}  # top-level folders that are not the product
# Imports between two parts of one layer, allowed one way: (importer, imported), each a part's name.
PEERS = {
    ("device.settings", "device.toml_file"),
    ("device.bench", "device.service"),  # the soak reads the daemon's status socket
    ("device.cli", "device.commands"),
    ("device.__main__", "device.cli"),
}


def part_of(module: str) -> tuple[int, str] | None:
    """(layer, part): the part is the layer's name that matches `module` (its package for `name.*`)."""
    for index, names in enumerate(LAYERS):
        if module in names:
            return index, module
    for index, names in enumerate(LAYERS):
        for name in names:
            if name.endswith(".*") and fnmatch.fnmatchcase(module, name):
                return index, name[:-2]
    return None


def product_modules(root: Path) -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(path: Path, modules: dict[str, Path]) -> tuple[set[str], list[str]]:
    """Product modules imported anywhere in the file (function-level imports too), and the imports no
    reader can follow: relative ones, and importlib/__import__ of a product module or of a computed name."""
    found, hidden = set(), []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                hidden.append(f"line {node.lineno}: a relative import ({'.' * node.level}{node.module or ''})")
                continue
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            argument = node.args[0] if node.args else None
            name = argument.value if isinstance(argument, ast.Constant) else None
            if name is None or name.split(".")[0] in PACKAGES:
                hidden.append(f"line {node.lineno}: a dynamic import of {name or 'a computed name'}")
    return {name for name in found if name in modules}, hidden


def _dynamic_import(call: ast.Call) -> bool:
    function = call.func
    if isinstance(function, ast.Name):
        return function.id == "__import__"
    return isinstance(function, ast.Attribute) and function.attr == "import_module"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other, directly or round about (Tarjan's strongly connected components)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def violations(root: Path) -> list[str]:
    """Every way the tree at `root` breaks the map."""
    modules = product_modules(root)
    found = [
        f"{d.name}/ is a top-level package the layer map does not know: add it to LAYERS and PACKAGES"
        for d in sorted(root.iterdir())
        if d.is_dir()
        and not d.name.startswith(".")
        and d.name not in (*PACKAGES, *NOT_PACKAGES)
        and any(d.rglob("*.py"))
    ]
    graph = {}
    for module, path in sorted(modules.items()):
        imported, hidden = imports_of(path, modules)
        graph[module] = imported - {module}
        found += [f"{module}: {what}" for what in hidden]
        mine = part_of(module)
        if mine is None:
            found.append(f"{module} is in no layer of tests/test_layers.py")
            continue
        for other in sorted(graph[module]):
            theirs = part_of(other)
            if theirs is None:
                continue
            if theirs[0] > mine[0]:
                found.append(f"{module} (layer {mine[0]}) imports {other} (layer {theirs[0]}): imports point down")
            elif theirs[0] == mine[0] and theirs[1] != mine[1] and (mine[1], theirs[1]) not in PEERS:
                found.append(f"{module} imports its peer {other}: not in PEERS")
    found += [f"an import cycle: {' -> '.join(group)}" for group in cycles(graph)]
    return found


def test_the_product_keeps_the_map():
    assert violations(REPO) == []


def test_only_commands_know_argparse():
    knowing = [m for m, p in product_modules(REPO).items() if "argparse" in {n.split(".")[0] for n in _all_imports(p)}]
    assert all(m.startswith("device.commands") or m == "device.cli" for m in knowing), knowing


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {
        "engines/__init__.py": "",
        "device/__init__.py": "",
        "calibration/__init__.py": "",
        "device/sound/__init__.py": "",
        "device/avatar/__init__.py": "",
        "device/conversation/__init__.py": "",
        **files,
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    "files, expected",
    [
        (
            {"device/sound/a.py": "from device.avatar import b\n", "device/avatar/b.py": ""},
            "device.sound.a imports its peer device.avatar.b: not in PEERS",
        ),
        (
            {
                "device/conversation/a.py": "import device.conversation.b\n",
                "device/conversation/b.py": "def f():\n    from device.conversation import a\n",
            },
            "an import cycle: device.conversation.a -> device.conversation.b",
        ),
        (
            {"device/sound/a.py": "from .. import settings\n", "device/settings.py": ""},
            "device.sound.a: line 1: a relative import (..)",
        ),
        (
            {"device/sound/a.py": "import importlib\nx = importlib.import_module('device.app')\n", "device/app.py": ""},
            "device.sound.a: line 2: a dynamic import of device.app",
        ),
        (
            {"plugins/__init__.py": "", "plugins/voice.py": "import device\n"},
            "plugins/ is a top-level package the layer map does not know: add it to LAYERS and PACKAGES",
        ),
        ({"device/newthing.py": ""}, "device.newthing is in no layer of tests/test_layers.py"),
        (
            {"device/sound/a.py": "from device.app import x\n", "device/app.py": ""},
            "device.sound.a (layer 3) imports device.app (layer 6): imports point down",
        ),
    ],
)
def test_each_rule_fails_on_a_tree_that_breaks_it(tmp_path, files, expected):
    assert expected in violations(_tree(tmp_path, files))
