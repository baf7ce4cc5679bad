"""The names each TensorRT release's Python bindings really define, read from NVIDIA's own files.

10.3, 10.16 and 11.4: the bindings wheels on PyPI (about 1 MB each; their libraries are not on PyPI,
so the module cannot be imported, but a pybind11 module keeps every name it defines as a
NUL-terminated string, and the package's `__init__.py` defines the rest: `nptype`, `volume`, ...).
They are downloaded once with `pip download` into the wheelhouse beside the model wheels.
8.6 (no wheel on PyPI): `tensorrt-8.6.1-names.txt`, read from NVIDIA/TensorRT's v8.6.1 sources.

The linker merges a string into the tail of a longer one ("precision" may live inside
"get_precision"), so a name counts as defined when some NUL-terminated string ends with it: a
misspelled or removed name is never found, which is what the checks need.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
# simulated version -> (requirement, platform tag, Python version) of the nearest bindings wheel:
# JetPack 6.1/6.2 ship 10.3 (Python 3.10); JetPack 7.2 ships 10.16 and, from 7.2.2, 11.4.1 (Python 3.12;
# the PyPI wheel nearest to 11.4.1 is 11.4.0.106).
WHEELS = {
    "10.3.0": ("tensorrt-cu12-bindings==10.3.0", "manylinux_2_17_x86_64", "3.10"),
    "10.16.1": ("tensorrt-cu13-bindings==10.16.1.11", "manylinux_2_28_x86_64", "3.12"),
    "11.4.1": ("tensorrt-cu13-bindings==11.4.0.106", "manylinux_2_28_x86_64", "3.12"),
}
VERSIONS = ("8.6.2", *WHEELS)


class Names:
    """`name in names`: whether the release's bindings define `name`."""

    def __init__(self, source: str, binary: bytes, listed: set[str]) -> None:
        self.source, self._binary, self._listed = source, binary, listed

    def __contains__(self, name: str) -> bool:
        return name in self._listed or (name.encode() + b"\0") in self._binary


def wheelhouse() -> Path:
    from engines.store.model_store import default_wheelhouse

    return default_wheelhouse() / "tensorrt-bindings"


@functools.lru_cache(maxsize=None)
def real_names(version: str) -> Names:
    if version.startswith("8.6"):
        listed = {
            line.strip()
            for line in (HERE / "tensorrt-8.6.1-names.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        }
        return Names("NVIDIA/TensorRT v8.6.1 python/ sources", b"", listed)
    requirement, platform, python = WHEELS[version]
    wheel = _download(requirement, platform, python)
    with zipfile.ZipFile(wheel) as archive:
        binary = archive.read("tensorrt_bindings/tensorrt.so")
        init = archive.read("tensorrt_bindings/__init__.py").decode()
    return Names(wheel.name, binary, _top_level_names(init))


def _download(requirement: str, platform: str, python: str) -> Path:
    package, version = requirement.split("==")
    directory = wheelhouse()
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"
    found = sorted(directory.glob(pattern))
    if not found:
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                platform,
                "--python-version",
                python,
                "-d",
                str(directory),
                requirement,
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        found = sorted(directory.glob(pattern))
    if not found:
        raise FileNotFoundError(f"pip did not bring {requirement} into {directory}")
    return found[0]


def _top_level_names(source: str) -> set[str]:
    tree = ast.parse(re.sub(r"##([A-Z_]+)##", r"\1", source))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names
