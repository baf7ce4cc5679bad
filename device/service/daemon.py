"""`orin-avatar run`: the daemon systemd starts.

The main thread shows the avatar.
Start: load settings and models (STATUS lines, EXTEND_TIMEOUT_USEC while it works), open the
microphone and speaker, start the conversation; READY=1 once a conversation can happen. Then the
main thread shows the avatar until a signal: SIGHUP reloads the settings' knowledge base on the reload
thread (the old one stays if the new one is broken),
SIGTERM stops cleanly (STOPPING=1, exit 0 within seconds). WATCHDOG=1 is
sent only while every worker thread has reported in within its deadline.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.errors import InputError, OrinAvatarError
from engines.fallback import FallbackRunner
from engines.store.model_store import state_home

from device.app import App
from device.avatar.animator import Avatar, State
from device.avatar.display import NullSink, open_display, x_display_reachable
from device.avatar.renderer import Colours, Renderer
from device.avatar.styles import Style, open_style
from device.conversation.report import turn_report
from device.conversation.turn_loop import Conversation
from device.conversation.visitors import VisitorGreeting
from device.models import catalog
from device.service.audience import Audience
from device.service.heartbeats import Heartbeats
from device.service.memory import limit_arenas, release_free_memory
from device.service.notifier import Notifier, watchdog_interval
from device.service.reloader import Reloader
from device.service.state_lock import StateLock
from device.service.status_socket import StatusServer
from device.sound.devices import DeviceSpeaker
from device.sound.echo_room import EchoPath, EchoRoom, active_rms
from device.sound.microphones import DeviceMicrophone, FileMicrophone
from device.sound.speakers import WavFileSpeaker
from device.vision.camera import Camera
from device.vision.perception import Perception

log = logging.getLogger(__name__)
STAGE_DEADLINE_S = 5.0  # a worker silent for longer is hung
DEFAULT_WATCHDOG_S = 5.0  # ping interval when the watchdog is on but WATCHDOG_USEC is missing
DISPLAY_LOOK_AGAIN_S = 5.0  # a window display that is lost, or found no X server, looks for one this often
DISPLAY_LOOK_AGAIN_MAX_S = 300.0  # ... doubling while windows opened again are lost within a minute
TRIM_EVERY_S = 30.0  # freed heap goes back to the system this often, when the conversation is idle


@dataclass(frozen=True)
class RunOptions:
    """Recorded devices instead of the configured ones (a replayed visit)."""

    mic: Path | None = None  # a WAV file as the microphone
    speaker: Path | None = None  # write the replies to this WAV file
    camera: Path | None = None  # a video file as the camera
    loop: bool = False  # play the --mic file again and again
    echo: EchoPath | None = None  # the replies reach the --mic file through this echo path


class Daemon:
    def __init__(self, app: App, options: RunOptions) -> None:
        self.app = app
        self.options = options
        self.avatar_inbox: queue.SimpleQueue = queue.SimpleQueue()  # messages for the display thread's avatar
        self.notifier = Notifier()
        self.heartbeats = Heartbeats()
        self.stop = threading.Event()
        self.reload = threading.Event()
        self.started = time.monotonic()
        self.state = "starting"
        self.reloader: Reloader | None = None
        self.conversation: Conversation | None = None
        self.display = "starting"
        self.avatar_style = "none"  # what the display shows: cartoon, portrait, or why not the portrait
        self.camera = None
        self.perception = None

    def run(self) -> int:
        self.state_lock = StateLock(state_home())  # first: a second daemon says so before it loads anything
        limit_arenas()  # before the conversation's threads start
        signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        signal.signal(signal.SIGINT, lambda *_: self.stop.set())
        signal.signal(signal.SIGHUP, lambda *_: self.reload.set())
        self.notifier.extend_timeout(120)
        self.notifier.status("loading models")
        settings = self.app.settings
        microphone = (
            FileMicrophone(self.options.mic, settings.audio, self.options.loop)
            if self.options.mic
            else DeviceMicrophone(settings.audio)
        )
        if microphone.array is not None:
            if self.options.echo is not None:
                raise InputError(
                    "--echo-db: the echo room is heard by one microphone; run it with [audio] array_channels = []"
                )
            # an array's beam has its own margin over the floor
            settings = dataclasses.replace(settings, endpoint=settings.endpoint.through_array())
        speakers: list = []

        def make_speaker(rate: int):
            made = (
                WavFileSpeaker(self.options.speaker, rate)
                if self.options.speaker
                else DeviceSpeaker(rate, settings.audio.output_device)
            )
            speakers.append(made)
            return made

        conversation = self.app.conversation(
            make_speaker,
            build_engines=True,
            settings=settings,
            heartbeat=self.heartbeats.register("turns", STAGE_DEADLINE_S),
            report=self._progress,
            observer=self.avatar_inbox.put,
            hears_speaker=self.options.speaker is None or self.options.echo is not None,
        )
        self.conversation, self.speaker = conversation, speakers[0]
        self.microphone = microphone
        status, workers = None, []
        try:  # from here on, whatever fails or stops us, the conversation is closed before the process ends
            if self.options.echo is not None:
                microphone.room = self._echo_room(conversation, microphone.audio[0])
            status = StatusServer(self.snapshot)
            workers.append(
                threading.Thread(
                    target=microphone.run,
                    name="microphone",
                    daemon=True,
                    args=(
                        conversation.feed,
                        lambda: conversation.warming_up,
                        self.heartbeats.register("microphone", STAGE_DEADLINE_S),
                        self.stop,
                    ),
                )
            )
            workers.append(threading.Thread(target=self._trim_memory, name="memory", daemon=True, args=(conversation,)))
            interval = watchdog_interval()
            if interval is not None:
                workers.append(
                    threading.Thread(
                        target=self.heartbeats.run_watchdog,
                        name="watchdog",
                        daemon=True,
                        args=(self.notifier.watchdog, min(interval, DEFAULT_WATCHDOG_S), self.stop),
                    )
                )
            for worker in workers:
                worker.start()
            self.reloader = Reloader(
                self.app.config,
                conversation,
                self.notifier,
                self._summary,
                self.heartbeats.register("reload", STAGE_DEADLINE_S),
                self.reload,
                self.stop,
            )
            conversation.warm_up(settings.bargein.startup_phrase)
            self.perception = self._start_perception(settings, conversation)
            self.state = "ready"
            self.notifier.ready(self._summary())
            log.info("%s", self._summary())
            self._display_loop(settings.avatar, Avatar())
        finally:
            self._shutdown(conversation, status, workers)
        return 0

    def _echo_room(self, conversation: Conversation, visitor: np.ndarray) -> EchoRoom:
        """A hall between the replies file and the recorded visit: its echo level is set against the
        visit's speech and the greeting's."""
        greeting = conversation.dialogue.intents["greeting"].answer
        room = EchoRoom(
            self.options.echo, active_rms(visitor), conversation.speech.audio_of(greeting), self.speaker.sample_rate
        )
        self.speaker.card = room.play
        log.info("replies reach the microphone through an echo room: %s", self.options.echo)
        return room

    def _style(self, settings) -> Style:
        """The configured style; a portrait that cannot be used leaves the drawn character, with the reason."""
        try:
            style = open_style(settings, self.app.store)
            self.avatar_style = settings.style
            return style
        except OrinAvatarError as error:
            log.error("%s; showing the drawn character instead", error)
            self.avatar_style = f"cartoon ({error})"
            return Renderer(settings.width, settings.height, Colours.of(settings))

    def _display_loop(self, settings, avatar: Avatar) -> None:
        """The main thread: the avatar at its frame rate (OpenCV windows belong to the main thread).
        The avatar is changed here only: the other threads send it messages. A display
        that fails is dropped; the conversation goes on, and a window display comes back when its X
        server does (a kiosk's X restarted, or started after the daemon)."""
        sink = self._open_display(settings)
        renderer = self._style(settings) if sink.name != "null" else None
        started, period = time.monotonic(), 1 / settings.fps
        opened_at, reopened = started, 0  # reopened: windows opened again that were lost within a minute
        look_again_at = started + DISPLAY_LOOK_AGAIN_S
        beat = self.heartbeats.register("display", STAGE_DEADLINE_S)  # a hung display stops the watchdog
        while not self.stop.wait(period if sink.name != "null" else 0.2):
            beat()
            self._deliver(avatar)
            if avatar.state == State.SPEAKING and not self.speaker.busy:
                avatar.silence()
            now = time.monotonic()
            if sink.name == "null" and settings.display == "window" and now >= look_again_at:
                look_again_at = now + DISPLAY_LOOK_AGAIN_S
                if x_display_reachable():
                    log.warning(
                        "an X display answers at DISPLAY=%r now: showing the avatar", os.environ.get("DISPLAY", "")
                    )
                    sink, opened_at = self._open_display(settings), now
                    renderer = renderer or self._style(settings)
            if sink.name != "null" and not sink.show(renderer.render(avatar.pose(now - started))):
                sink.close()
                sink, self.display = NullSink(), "lost"
                reopened = (
                    reopened + 1 if now - opened_at < 60 else 0
                )  # a window that keeps failing is tried less often
                look_again_at = now + min(DISPLAY_LOOK_AGAIN_S * 2**reopened, DISPLAY_LOOK_AGAIN_MAX_S)
        sink.close()

    def _open_display(self, settings):
        sink = open_display(
            settings.display,
            settings.width,
            settings.height,
            settings.fps,
            path=state_home() / "avatar.mp4" if settings.display == "file" else None,
        )
        self.display = sink.name
        return sink

    def _trim_memory(self, conversation: Conversation) -> None:
        """Return freed heap to the system now and then, on a thread of its own (a trim of a fragmented
        heap takes 0.1-0.3 s, a stall the display must not see) and only while the conversation is idle
        (it holds the allocator's locks while it works)."""
        while not self.stop.wait(TRIM_EVERY_S):
            if conversation.idle():
                started = time.monotonic()
                release_free_memory()
                log.debug("returned freed memory to the system in %.0f ms", (time.monotonic() - started) * 1000)

    def _deliver(self, avatar: Avatar) -> None:
        """Apply what the other threads sent the avatar since the last frame."""
        while True:
            try:
                message = self.avatar_inbox.get_nowait()
            except queue.Empty:
                return
            avatar.on_message(message, lambda: self.speaker.played)

    def _start_perception(self, settings, conversation: Conversation) -> Perception | None:
        """Camera -> faces -> engagement (device/service/audience.py): the visit's greeting hears
        arrivals and departures, the avatar who is there and where to look, the beam where to point."""
        camera_settings = settings.camera
        greeting = VisitorGreeting(conversation, camera_settings.gate_listening)
        source = str(self.options.camera) if self.options.camera else camera_settings.source
        if not source:
            self.camera = None
            return None
        self.camera = Camera(source, camera_settings.width, camera_settings.height, camera_settings.fps)
        audience = Audience(camera_settings, greeting, self.avatar_inbox, self.microphone.steer)
        faces = catalog.load_faces(self.app.store, 1)
        return audience.watch(self.camera, faces, self.heartbeats.register("perception", STAGE_DEADLINE_S))

    def _progress(self, line: str) -> None:
        self.notifier.status(line)
        self.notifier.extend_timeout(60)
        log.info("%s", line)

    def _summary(self) -> str:
        runners = self.conversation.runners()
        on_cpu = [runner for runner in runners.values() if runner.kind == "cpu"]
        reason = next((r.snapshot().last_reason for r in on_cpu if isinstance(r, FallbackRunner)), "")
        return f"ready: {len(runners) - len(on_cpu)} models on GPU, {len(on_cpu)} on CPU" + (
            f" ({reason})" if reason else ""
        )

    def _shutdown(
        self, conversation: Conversation, status: StatusServer | None, workers: list[threading.Thread]
    ) -> None:
        self.state = "stopping"
        self.notifier.stopping()
        self.stop.set()
        for worker in workers:
            worker.join(timeout=2)
        if self.reloader is not None:
            self.reloader.join(timeout=10)  # it stops at its next batch: ONNX Runtime must not run as the process exits
        if self.perception is not None:
            self.perception.close()
            self.camera.close()
        conversation.close()
        self.speaker.close()
        if status is not None:
            status.close()
        if self.options.speaker:
            log.info("stopped; wrote %.1f s of speech to %s", self.speaker.seconds, self.options.speaker)

    def snapshot(self) -> dict:
        """What `orin-avatar status` shows."""
        conversation = self.conversation
        models = {}
        for name, runner in conversation.runners().items():
            entry = {"backend": runner.backend, "kind": runner.kind}
            if isinstance(runner, FallbackRunner):
                stats = runner.snapshot()
                entry |= {
                    "engine_calls": stats.engine_calls,
                    "cpu_calls": stats.cpu_calls,
                    "fallbacks": stats.fallbacks,
                    "reason": stats.last_reason,
                }
            models[name] = entry
        return {
            "state": self.state,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started, 1),
            "conversation": conversation.phase().value,  # idle, listening, thinking, speaking, interrupted
            "status": self.notifier.last_status,
            "models": models,
            "devices": {
                "microphone": self.microphone.state,
                "speaker": (f"file {self.options.speaker}" if self.options.speaker else self.speaker.state)
                + (f" (failing: {self.speaker.fault})" if self.speaker.fault else ""),
                "camera": self.camera.state if self.camera else "none",
                "display": self.display,
            },
            "avatar": self.avatar_style,
            "heartbeats_s": self.heartbeats.ages(),
            "hung_stages": self.heartbeats.stale(),
            "knowledge": {
                "intents": len(conversation.dialogue.intents),
                "last_reload": self.reloader.last if self.reloader is not None else "",
            },
            "tally": conversation.tally(),
            "bargein": {
                "enabled": conversation.bargein is not None,
                "echo_canceller": "webrtc" if conversation.echo is not None else "none",
                "erle_db": conversation.echo.erle_db() if conversation.echo is not None else None,
            },
            "turns": [_short(turn_report(t)) for t in list(conversation.turns)[-10:] if t.done.is_set()],
        }


def _short(report: dict) -> dict:
    return {
        k: report[k]
        for k in (
            "turn",
            "transcript",
            "intent",
            "about",
            "source",
            "ignored",
            "interrupted",
            "barged_in",
            "played_s",
            "unsaid",
        )
    } | {"latency_ms": report["ms"]["turn"], "asr_ms": report["ms"]["asr"]}
