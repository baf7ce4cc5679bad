"""Putting the conversation together from the settings and the model store."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from engines.store.model_store import ModelStore

from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.llm import LlmClient
from device.conversation.speech_out import SpeechOut
from device.conversation.turn_loop import Conversation
from device.models import catalog
from device.settings import Settings
from device.sound.speakers import Speaker


def build_dialogue(settings: Settings, store: ModelStore, threads: int) -> Dialogue:
    intents = load_knowledge(Path(settings.dialogue.knowledge) if settings.dialogue.knowledge else None)
    llm = LlmClient(settings.llm) if settings.llm.enabled else None
    return Dialogue(catalog.load_text(store, threads), intents, settings.dialogue, llm)


def build_conversation(settings: Settings, store: ModelStore, threads: int,
                       make_speaker: Callable[[int], Speaker]) -> Conversation:
    """A ready conversation; `make_speaker` gets the voice's sample rate. The knowledge base's
    answers start synthesizing into the cache in the background."""
    tts = catalog.load_tts(store, threads, variability=settings.tts.variability, length_scale=settings.tts.length_scale)
    speech = SpeechOut(tts, cache=settings.tts.cache)
    dialogue = build_dialogue(settings, store, threads)
    speech.prepare([i.answer for i in dialogue.intents.values() if i.answer])
    return Conversation(catalog.load_vad(store), catalog.load_asr(store, threads), dialogue, speech,
                        make_speaker(tts.sample_rate), settings.endpoint)
