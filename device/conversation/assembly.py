"""Putting the conversation together from the settings and the model store."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from calibration import TABLES_DIR
from engines.engine_manager import EngineManager
from engines.store.model_store import ModelStore, state_home

from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.llm import LlmClient
from device.conversation.speech_out import SpeechOut
from device.conversation.turn_loop import Conversation
from device.models import catalog
from device.settings import Settings
from device.sound.speakers import Speaker

log = logging.getLogger(__name__)


def make_engines(settings: Settings, store: ModelStore, report: Callable[[str], None] = log.info) -> EngineManager | None:
    """The engine manager, or None (with one log line saying why) when every model runs on the CPU."""
    manager = EngineManager(store, state_home() / "engines", settings.engines, TABLES_DIR, report=report)
    if manager.unavailable:
        log.warning("all models run on the CPU (ONNX Runtime): %s", manager.unavailable)
        return None
    return manager


def build_dialogue(settings: Settings, store: ModelStore, threads: int, engines: EngineManager | None = None) -> Dialogue:
    intents = load_knowledge(Path(settings.dialogue.knowledge) if settings.dialogue.knowledge else None)
    llm = LlmClient(settings.llm) if settings.llm.enabled else None
    return Dialogue(catalog.load_text(store, threads, engines), intents, settings.dialogue, llm)


def build_conversation(settings: Settings, store: ModelStore, threads: int,
                       make_speaker: Callable[[int], Speaker], heartbeat: Callable[[], None] = lambda: None,
                       report: Callable[[str], None] = log.info,
                       observer: Callable[[object], None] = lambda message: None) -> Conversation:
    """A ready conversation; `make_speaker` gets the voice's sample rate. Models start on the CPU
    and move to their TensorRT engines as these are found or built; the knowledge base's answers
    start synthesizing into the cache in the background."""
    engines = make_engines(settings, store, report)
    tts = catalog.load_tts(store, threads, variability=settings.tts.variability, length_scale=settings.tts.length_scale,
                           engines=engines)
    speech = SpeechOut(tts, cache=settings.tts.cache)
    dialogue = build_dialogue(settings, store, threads, engines)
    speech.prepare([i.answer for i in dialogue.intents.values() if i.answer])
    return Conversation(catalog.load_vad(store, engines=engines), catalog.load_asr(store, threads, engines),
                        dialogue, speech, make_speaker(tts.sample_rate), settings.endpoint, heartbeat, observer)
