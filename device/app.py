"""The application context: what every command and the daemon work from, built once by the CLI.

It holds the global choices (settings file, model store, CPU threads) and puts the parts together:
the engine manager, the dialogue, the conversation. Whether TensorRT engines may be built is the
caller's choice: the daemon and `orin-avatar build` build what is missing; `demo` and the benchmarks
use the engines that exist (or the CPU) and never spend minutes building while they measure.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engines.engine_manager import EngineManager
from engines.errors import InputError, OrinAvatarError
from engines.store.model_store import ModelStore, state_home

from calibration import TABLES_DIR
from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.llm import LlmClient
from device.conversation.speech_out import SpeechOut
from device.conversation.turn import KEEP_TURNS
from device.conversation.turn_loop import Conversation
from device.models import catalog
from device.settings import MAX_THREADS, BargeInSettings, Settings, load_settings
from device.sound.echo_canceller import EchoCanceller, EchoCancellerError
from device.sound.speakers import Speaker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class App:
    config: Path | None = None  # settings file (None: /etc/orin-avatar/orin-avatar.toml if present)
    store_dir: Path | None = None  # overrides [models] store
    threads_override: int | None = None  # overrides [cpu] threads
    verbose: bool = False
    tables: Path = TABLES_DIR  # the shipped calibration tables

    def __post_init__(self) -> None:
        if self.threads_override is not None and not 1 <= self.threads_override <= MAX_THREADS:
            raise InputError(f"--threads must be between 1 and {MAX_THREADS}, got {self.threads_override}")

    @functools.cached_property
    def settings(self) -> Settings:
        """Read once, on first use (so `doctor` can report a broken file instead of failing)."""
        return load_settings(self.config)

    @functools.cached_property
    def store(self) -> ModelStore:
        configured = self.settings.models.store
        return ModelStore(self.store_dir or (Path(configured) if configured else None))

    @property
    def threads(self) -> int:
        return self.threads_override or self.settings.cpu.threads

    def engines(
        self, build: bool, report: Callable[[str], None] = log.info, settings: Settings | None = None
    ) -> EngineManager | None:
        """The engine manager, or None (with one log line saying why) when every model runs on the CPU.
        `build`: build missing engines in the background (the daemon), or only use the valid ones
        already cached (demo, benchmarks)."""
        settings = settings or self.settings
        manager = EngineManager(
            self.store, state_home() / "engines", settings.engines, self.tables, report=report, build_missing=build
        )
        if manager.unavailable:
            log.warning("all models run on the CPU (ONNX Runtime): %s", manager.unavailable)
            return None
        return manager

    def dialogue(self, engines: EngineManager | None = None, settings: Settings | None = None) -> Dialogue:
        settings = settings or self.settings
        intents = load_knowledge(Path(settings.dialogue.knowledge) if settings.dialogue.knowledge else None)
        llm = LlmClient(settings.llm) if settings.llm.enabled else None
        return Dialogue(catalog.load_text(self.store, self.threads, engines), intents, settings.dialogue, llm)

    def conversation(
        self,
        make_speaker: Callable[[int], Speaker],
        build_engines: bool,
        heartbeat: Callable[[], None] = lambda: None,
        report: Callable[[str], None] = log.info,
        observer: Callable[[object], None] = lambda message: None,
        settings: Settings | None = None,
        keep_turns: int | None = KEEP_TURNS,
        hears_speaker: bool = False,
    ) -> Conversation:
        """A ready conversation; `make_speaker` gets the voice's sample rate. Models start on the CPU
        and move to their TensorRT engines as these are found (or built, with `build_engines`); the
        knowledge base's answers start synthesizing into the cache in the background. `hears_speaker`:
        the microphone hears the speaker (sound cards, an echo room), so the echo canceller is needed;
        a recorded visit answered into a file has no echo to cancel."""
        settings = settings or self.settings
        engines = self.engines(build_engines, report, settings)
        tts = catalog.load_tts(
            self.store,
            self.threads,
            variability=settings.tts.variability,
            length_scale=settings.tts.length_scale,
            engines=engines,
        )
        speech = SpeechOut(tts, cache=settings.tts.cache)
        dialogue = self.dialogue(engines, settings)
        bargein, echo = (
            self._echo_canceller(settings.bargein, tts.sample_rate) if hears_speaker else (settings.bargein, None)
        )
        conversation = Conversation(
            catalog.load_vad(self.store, engines=engines),
            catalog.load_asr(self.store, self.threads, engines),
            dialogue,
            speech,
            make_speaker(tts.sample_rate),
            settings.endpoint,
            heartbeat,
            observer,
            keep_turns,
            self._end_of_turn(settings.endpoint, engines),
            bargein,
            echo,
        )
        policies = conversation.listening.endpointer.policies
        log.info("turn-taking at a pause: %s", ", then ".join(policy.name for policy in policies))
        # Last: once the cache's thread synthesizes, a start-up that fails would abort the interpreter's exit.
        speech.prepare([i.answer for i in dialogue.intents.values() if i.answer])
        return conversation

    @staticmethod
    def _echo_canceller(bargein: BargeInSettings, speaker_rate: int) -> tuple[BargeInSettings, EchoCanceller | None]:
        """The configured echo canceller; without one that works, no barge-in (the robot would interrupt itself)."""
        if bargein.echo_canceller == "none":
            return bargein, None
        try:
            return bargein, EchoCanceller(speaker_rate, bargein.echo_tail_ms)
        except EchoCancellerError as exc:
            log.warning('no echo cancellation, so no barge-in (only "stop" is heard while speaking): %s', exc)
            return dataclasses.replace(bargein, enabled=False), None

    def _end_of_turn(self, endpoint, engines):
        """The end-of-turn model if it is on; without it (off, or it cannot be loaded) the hangover is fixed."""
        if not endpoint.end_of_turn:
            return None
        try:
            return catalog.load_end_of_turn(self.store, self.threads, endpoint.end_of_turn_threshold, engines)
        except OrinAvatarError as exc:
            log.warning(
                "no end-of-turn model, every pause gets the fixed %d ms hangover: %s", endpoint.hangover_ms, exc
            )
            return None
