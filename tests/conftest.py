"""Shared fixtures: the real model store (made by `make test`'s set-up) and the real models."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from engines import platform as platform_module
from engines import trt_builder
from engines.engine_manager import EngineManager, EngineSettings
from engines.store.model_store import ModelStore, default_wheelhouse

from device.audio_file import read_audio
from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.speech_out import SpeechOut
from device.conversation.turn_loop import Conversation
from device.models import catalog
from device.settings import EndpointSettings, load_settings
from device.sound.speakers import RecordingSpeaker
from tests.llm_server import FaultyLine, LlamaServer

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


# One directions example is the nearest in words to a question about access ("Is there a lift for
# strollers and wheelchairs?"), two of accessibility's the nearer on average: the dialogue's ranking rule.
LIFTS = {
    "directions": ("Where are the lifts?", "How do I get to the second floor?", "Which way to the exit?"),
    "accessibility": ("Is the building wheelchair accessible?", "Do you have a ramp?", "Can I borrow a wheelchair?"),
}


def knowledge_file(path: Path, intents: dict[str, tuple[str, ...]]) -> Path:
    """A knowledge base TOML with `intents` (name -> examples), each answered with a sentence of its own."""
    path.write_text(
        "".join(
            f'[[intent]]\nname = "{name}"\nexamples = {json.dumps(list(examples))}\nanswer = "This is about {name}."\n'
            for name, examples in intents.items()
        )
    )
    return path


# The endpointer's rules over the bare hangover, all off: each test turns on what it tests. The product's
# defaults are device/default.toml's alone (tests/test_settings_defaults.py).
RULES_OFF = dict(
    end_of_turn=False,
    end_of_turn_threshold=0.5,
    min_hangover_ms=200,
    max_hangover_ms=1200,
    wait_after_open_words=False,
    end_on_known_question=False,
    known_question_threshold=0.7,
    rejoin_within_ms=0,
    min_level_over_floor_db=0.0,
    array_level_over_floor_db=0.0,
    level_hysteresis_db=0.0,
    array_level_hysteresis_db=0.0,
    array_min_on_axis_db=-30.0,
    quiet_hangover_ms=0,
    quiet_over_floor_db=30.0,
)


def endpoint_settings(**given) -> EndpointSettings:
    """Endpoint settings for a test: `given`, and RULES_OFF for the rest."""
    return EndpointSettings(**(RULES_OFF | given))


ENDPOINT = endpoint_settings(vad_threshold=0.5, onset_ms=64, hangover_ms=400, pre_roll_ms=256, max_utterance_s=15.0)


@pytest.fixture
def make_conversation(vad, asr, text_encoder, tts):
    """Conversations over the session's models, answering into a recording speaker; closed after the test."""
    made = []

    def make(
        realtime_speaker: bool = False,
        endpoint: EndpointSettings = ENDPOINT,
        end_of_turn=None,
        dialogue: Dialogue | None = None,
    ) -> Conversation:
        dialogue = dialogue or Dialogue(text_encoder, load_knowledge(), load_settings().dialogue)
        speaker = RecordingSpeaker(tts.sample_rate, realtime=realtime_speaker)
        conversation = Conversation(vad, asr, dialogue, SpeechOut(tts), speaker, endpoint, end_of_turn=end_of_turn)
        made.append(conversation)
        return conversation

    yield make
    for conversation in made:
        conversation.close()
        conversation.speaker.close()


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory):
    """The real LLM server of tests/llm_server.py, started once (it takes a few seconds)."""
    server = LlamaServer(tmp_path_factory.mktemp("llm") / "server.log")
    yield server
    server.stop()


@pytest.fixture
def llm_line(llm_server):
    """A fresh proxy to the real server, passing everything through until a test sets its `fault`;
    afterwards the server is idle, whatever the fault left it doing."""
    line = FaultyLine(llm_server.port)
    yield line
    line.close()
    llm_server.reply_once()


@pytest.fixture(scope="session")
def beckett(store) -> np.ndarray:
    return read_audio(store.path("samples/beckett.wav"))


def skimage_bgr(name: str) -> np.ndarray:
    import skimage.data

    image = getattr(skimage.data, name)()
    return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR) if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2BGR)


FPS = 10  # of the clips made by visitor_clip


def visitor_clip(path, seconds_without: float, seconds_with: float, seconds_after: float) -> None:
    """1280x720: an empty hall (the coffee photo), then the astronaut in it, then the hall again."""
    hall = cv2.resize(skimage_bgr("coffee"), (1280, 720))
    visitor = hall.copy()
    visitor[150:662, 500:1012] = skimage_bgr("astronaut")  # a face of about 105 px
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (1280, 720))
    for frame, seconds in ((hall, seconds_without), (visitor, seconds_with), (hall, seconds_after)):
        for _ in range(int(seconds * FPS)):
            writer.write(frame)
    writer.release()


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "device", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


# --- TensorRT through the simulator (tests/trt_sim) ----------------------------------------------

SIM_PATH = str(REPO / "tests" / "trt_sim")
SETTINGS = EngineSettings(
    enabled=True,
    precision="auto",
    dla_core=-1,
    workspace_mb=256,
    tactic_dram_mb=512,
    optimization_level=1,
    build_timeout_s=120,
)


def unload_tensorrt() -> None:
    for name in [m for m in sys.modules if m == "tensorrt" or m.startswith("pycuda")]:
        del sys.modules[name]
    trt_builder._registered_logger.cache_clear()
    platform_module.probe_platform.cache_clear()


@pytest.fixture
def trt(monkeypatch, request):
    """The simulated TensorRT of the version in the test's `version` mark (default 10.3.0)."""
    marker = request.node.get_closest_marker("version")
    monkeypatch.setenv("TRT_SIM_VERSION", marker.args[0] if marker else "10.3.0")
    monkeypatch.syspath_prepend(SIM_PATH)  # inherited by the builder's spawned child
    unload_tensorrt()
    module = importlib.import_module("tensorrt")
    module.SIM.reset()
    yield module
    unload_tensorrt()


@pytest.fixture
def tables(store, tmp_path):
    directory = tmp_path / "tables"
    directory.mkdir()
    return directory


def manager(store, tmp_path, tables, settings=SETTINGS, platform=None) -> EngineManager:
    """An engine manager over a test's own engine cache and tables directory."""
    return EngineManager(store, tmp_path / "engines", settings, tables, platform=platform)


@pytest.fixture
def daemons():
    """Daemons (tests/test_daemon.py's Daemon) a test starts: killed if still running, their log printed."""
    started = []
    yield started
    for daemon in started:
        if daemon.process.poll() is None:
            os.killpg(daemon.process.pid, signal.SIGKILL)  # with a wrapper's (strace's) children
            daemon.process.wait()
        print(daemon.process.stderr.read()[-20000:])  # the daemon's log, which pytest shows if the test failed
        daemon.socket.close()
