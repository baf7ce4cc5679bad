"""Shared fixtures: the real model store (made by `make test`'s set-up) and the real models."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from engines.store.model_store import ModelStore, default_wheelhouse

from device.audio_file import read_audio
from device.models import catalog

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def store() -> ModelStore:
    store = ModelStore()
    if not store.entries():  # raises with the sync command when the store is missing
        pytest.fail("empty model store")
    return store


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    path = default_wheelhouse()
    assert path.is_dir(), f"no wheelhouse at {path}: run 'orin-avatar models download'"
    return path


@pytest.fixture(scope="session")
def asr(store):
    return catalog.load_asr(store, threads=2)


@pytest.fixture(scope="session")
def tts(store):
    """Without random variation, so a sentence always sounds the same and tests cannot flake."""
    return catalog.load_tts(store, threads=2, variability=0.0)


@pytest.fixture(scope="session")
def vad(store):
    return catalog.load_vad(store)


@pytest.fixture(scope="session")
def faces(store):
    return catalog.load_faces(store)


@pytest.fixture(scope="session")
def text_encoder(store):
    return catalog.load_text(store)


@pytest.fixture(scope="session")
def beckett(store) -> np.ndarray:
    return read_audio(store.path("samples/beckett.wav"))


NUMBERS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


def words(text: str) -> list[str]:
    """Lower-case words without punctuation or hyphens ("to-morrow"), numbers as digits."""
    return [NUMBERS.get(w, w) for w in re.findall(r"[a-z0-9']+", text.lower().replace("-", ""))]


def skimage_bgr(name: str) -> np.ndarray:
    import skimage.data

    image = getattr(skimage.data, name)()
    return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR) if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2BGR)


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "device", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=300)
