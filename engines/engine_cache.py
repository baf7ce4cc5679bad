"""The engine cache: one directory per model, an engine and its manifest per engine key.

An engine is valid only for the exact inputs that made it, so the key hashes all of them (the
ONNX and table bytes, precision, DLA core, profiles, workspace, optimization level, TensorRT, CUDA,
driver, L4T, GPU); any change is a different key and a new build, and engines under other keys are
removed as stale (docs/integrator/tensorrt.md).
Writes are atomic and made under the model's lock, so two processes building at
once never leave half an engine, and a manifest records a failed rung so it is not retried on
every start.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engines.files import file_lock, write_atomic

SCHEMA = 1  # bump when anything the key does not capture changes how engines are built


@dataclass(frozen=True)
class EngineKey:
    model: str
    onnx_sha256: str
    table_sha256: str | None
    precision: str
    dla_core: int | None
    profile: dict
    workspace_mb: int
    tactic_dram_mb: int
    optimization_level: int
    platform: dict  # TensorRT, CUDA, driver, L4T, GPU, compute capability

    @property
    def digest(self) -> str:
        fields = asdict(self) | {"schema": SCHEMA}
        return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:24]


@dataclass
class EngineRecord:
    """The manifest beside an engine."""

    key: str
    model: str
    precision: str
    status: str  # valid | failed
    reason: str = ""
    attempts: int = 1  # builds tried under this key
    retry_after: float = 0.0  # of an interrupted build (killed, timed out): when to try again (0: never)
    built_at: float = field(default_factory=time.time)
    build_seconds: float = 0.0
    validation: dict = field(default_factory=dict)
    components: dict = field(default_factory=dict)
    sha256: str = ""  # the engine file's, as built and validated: a changed file is rebuilt, never run


class EngineCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def directory(self, model: str) -> Path:
        return self.root / model.removesuffix(".onnx")

    def engine_path(self, key: EngineKey) -> Path:
        return self.directory(key.model) / f"{key.digest}.engine"

    def lock(self, model: str):
        return file_lock(self.directory(model) / ".lock")

    def record(self, key: EngineKey) -> EngineRecord | None:
        path = self.directory(key.model) / f"{key.digest}.json"
        try:
            return EngineRecord(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def save(self, key: EngineKey, record: EngineRecord) -> None:
        """Write the manifest of the engine under `key` (the builder wrote the engine itself)."""
        record.components = asdict(key)
        write_atomic(self.directory(key.model) / f"{key.digest}.json", json.dumps(asdict(record), indent=1).encode())

    def remove_stale(self, model: str, keep: set[str]) -> list[str]:
        """Delete engines and manifests of `model` under keys other than `keep`."""
        removed = []
        for path in self.directory(model).glob("*"):
            if path.name.startswith(".") or path.name.split(".")[0] in keep:
                continue
            path.unlink(missing_ok=True)
            removed.append(path.name)
        return removed

    def records(self) -> list[EngineRecord]:
        out = []
        for path in sorted(self.root.glob("*/*.json")):
            try:
                out.append(EngineRecord(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return out

    def timing_cache_path(self, platform: dict) -> Path:
        digest = hashlib.sha256(json.dumps(platform, sort_keys=True).encode()).hexdigest()[:16]
        return self.root / f"timing-{digest}.cache"


def forget(path: Path) -> None:
    """Remove a file that proved unusable (a corrupt engine), ignoring a concurrent removal."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
