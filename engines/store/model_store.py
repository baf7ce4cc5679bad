"""The model store: a directory of verified model files and the manifest that vouches for them.

Only `models sync` writes here; everything else reads through `ModelStore.path`, which refuses a
file whose sha256 does not match the manifest, so a truncated or edited model never reaches a
runner.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from engines.errors import ModelStoreError
from engines.files import sha256_file, write_atomic

MANIFEST = "manifest.json"
SCHEMA = 1
SERVICE_HOME = Path("/var/lib/orin-avatar")


def default_store_dir() -> Path:
    """`$ORIN_AVATAR_HOME/models` if set; the service's state directory under systemd; else the
    user's cache."""
    return state_home() / "models"


def default_wheelhouse() -> Path:
    """Where `models download` keeps the pinned wheels unless told otherwise."""
    return state_home() / "wheels"


def state_home() -> Path:
    """The product's state directory: models, wheels, engines."""
    home = os.environ.get("ORIN_AVATAR_HOME")
    if home:
        return Path(home)
    state = os.environ.get("STATE_DIRECTORY")  # set by systemd's StateDirectory=
    if state:
        return Path(state.split(":")[0])
    if os.environ.get("INVOCATION_ID"):  # started by systemd without StateDirectory=
        return SERVICE_HOME
    return Path.home() / ".cache" / "orin-avatar"


@dataclass(frozen=True)
class StoreEntry:
    """What the manifest records of one file."""

    name: str
    sha256: str
    size: int
    package: str
    version: str
    license: str
    wheel_sha256: str
    members: tuple[str, ...]
    recipe: str


class ModelStore:
    """Read access to a synced store, with hash verification on first use of each file."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root else default_store_dir()
        self._verified: set[str] = set()
        self._entries: dict[str, StoreEntry] | None = None

    @property
    def sync_hint(self) -> str:
        flag = "" if self.root == default_store_dir() else f" --store {self.root}"
        return f"orin-avatar models sync{flag}"

    def entries(self) -> dict[str, StoreEntry]:
        if self._entries is None:
            self._entries = read_manifest(self.root)
            if not self._entries:
                raise ModelStoreError(
                    f"no model store at {self.root}. Run '{self.sync_hint}' to fetch and convert the models."
                )
        return self._entries

    def path(self, name: str) -> Path:
        """The verified path of a store file, e.g. 'asr-encoder.onnx'."""
        entry = self.entries().get(name)
        if entry is None:
            raise ModelStoreError(f"the model store at {self.root} has no {name}. Run '{self.sync_hint}'.")
        path = self.root / name
        if name not in self._verified:
            problem = verify_entry(path, entry)
            if problem:
                raise ModelStoreError(f"{path} {problem}. Run '{self.sync_hint}' to repair it.")
            self._verified.add(name)
        return path


def verify_entry(path: Path, entry: StoreEntry) -> str | None:
    """None if the file matches its manifest entry, else what is wrong with it."""
    if not path.is_file():
        return "is missing"
    if path.stat().st_size != entry.size:
        return f"has {path.stat().st_size} bytes, the manifest says {entry.size}"
    if sha256_file(path) != entry.sha256:
        return "does not match its sha256 in the manifest (corrupt or modified)"
    return None


def read_manifest(root: Path) -> dict[str, StoreEntry]:
    path = root / MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            return {}
        return {
            name: StoreEntry(name=name, **{**fields, "members": tuple(fields["members"])})
            for name, fields in data["files"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # also valid JSON of another shape
        raise ModelStoreError(
            f"{path} is not a valid manifest ({exc}). Delete it and run 'orin-avatar models sync'."
        ) from exc


def write_manifest(root: Path, entries: dict[str, StoreEntry]) -> None:
    files = {name: {k: v for k, v in asdict(e).items() if k != "name"} for name, e in sorted(entries.items())}
    write_atomic(root / MANIFEST, json.dumps({"schema": SCHEMA, "files": files}, indent=2).encode())
