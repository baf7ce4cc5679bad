"""`orin-avatar bench bargein`: a visitor talking over the robot, through an echo room.

The real conversation (echo canceller, VAD, endpointer, recognition, dialogue, speech) runs at the
microphone's real pace; its speaker's sound reaches the microphone through an `EchoRoom` (a
pyroomacoustics hall, 5-60 ms of device delay, a little clipping, the echo 0, +6 or +12 dB over the
visitor). Each level starts as the daemon does: the start-up phrase is said to the canceller before
anyone is listened to. Per echo level:
- interruptions: a bundled question, and while its answer plays, another bundled question at a
  random point; measured on the microphone's sample clock, from the interrupting speech's onset to
  the last sample the speaker played (the fade included); the answer it got against the one it gets
  asked in silence; and the mouth: closed on the avatar's next frame after the pause, before the
  sound is gone;
- quiet replies: a question and its whole answer with nobody talking over it: any pause is the
  robot interrupting itself; the canceller's echo return loss enhancement is measured on these;
- backchannels: "mm-hm", "okay", "yeah" over a reply, which must go on;
- paused questions: a question with a 600-1000 ms hesitation mid-sentence (the end-of-turn
  evaluation's cases, device/bench/pauses.py; its held-apart split unless asked otherwise) over a
  reply, which must be heard whole: one utterance, not ended before the question's last sound.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from typing import Callable

import numpy as np

from engines.errors import InputError
from engines.model_specs import FRAME, SPEECH_RATE

from device.app import App
from device.bench.pauses import PauseCase, load_cases
from device.bench.stats import percentiles_ms
from device.conversation.visit import Question, bundled_questions
from device.messages import ReplyPaused, ReplyResumed
from device.models.voices import VOICES, load_voices, speak
from device.sound.echo_room import BLOCK, EchoPath, EchoRoom, active_rms, block_power
from device.sound.microphones import MicrophoneClock
from device.sound.speakers import RecordingSpeaker

ECHO_LEVELS_DB = (0.0, 6.0, 12.0)
# The bundled visit's questions (not its hello and goodbye); their answers are 4-7 s long.
ASKED = ("02-opening.wav", "03-restrooms.wav", "04-tickets.wav", "05-wifi.wav")
BACKCHANNELS = ("Mm-hm.", "Okay.", "Yeah.")
FPS = 30.0  # the avatar's frame rate: the mouth must close within one frame of the sound
WAIT_S = 30.0  # for a reply to start or end
GAP_S = 0.1  # no block handed to the speaker for this long: it has gone quiet


def measure_bargein(
    app: App,
    interruptions: int = 10,
    quiet: int = 10,
    backchannels: int = 3,
    levels: tuple[float, ...] = ECHO_LEVELS_DB,
    seed: int = 0,
    paused: int = 4,
    pause_split: str = "held-apart",
) -> dict:
    if min(interruptions, quiet) < 1 or min(backchannels, paused) < 0:
        raise InputError("--interruptions and --quiet must be 1 or more, --backchannels and --paused 0 or more")
    settings = dataclasses.replace(app.settings, bargein=dataclasses.replace(app.settings.bargein, enabled=True))
    questions = bundled_questions()
    asked = [q for q in questions if q.name in ASKED]
    (voice,) = [v for v in VOICES if v.name == "joe"]
    synthesizers = load_voices(app.store, app.threads)
    fillers = [speak(synthesizers, voice, text)[0] for text in BACKCHANNELS]
    hesitant = [c for c in load_cases(app.store, pause_split, app.threads) if c.pause_ms] if paused else []
    levels_report = {}
    for level in levels:
        rng = random.Random(seed + int(level * 10))
        run = _EchoRun(app, settings, questions, level, rng)
        try:
            baseline = {q.name: run.intent_in_silence(q) for q in questions}
            cases = [
                run.interrupt(rng.choice(asked), q := rng.choice(asked), rng.uniform(0.4, 2.5), baseline[q.name])
                for _ in range(interruptions)
            ]
            run.conversation.echo.reset_erle()
            quiet_cases = [run.quiet(rng.choice(asked)) for _ in range(quiet)]
            erle = run.conversation.echo.erle_db()
            filler_cases = [
                run.backchannel(rng.choice(asked), rng.choice(fillers), rng.uniform(0.5, 2.0))
                for _ in range(backchannels)
            ]
            paused_cases = [
                run.hesitant(rng.choice(asked), rng.choice(hesitant), rng.uniform(0.4, 2.5)) for _ in range(paused)
            ]
        finally:
            run.close()
        levels_report[f"{level:+.0f} dB"] = _level_report(
            cases, quiet_cases, filler_cases, paused_cases, erle, run.room.path
        )
    return {
        "levels": levels_report,
        "interruptions_per_level": interruptions,
        "quiet_per_level": quiet,
        "backchannels_per_level": backchannels,
        "paused_per_level": paused,
        "pause_split": pause_split,
        "threads": app.threads,
        "settings": dataclasses.asdict(settings.bargein),
    }


def _level_report(
    cases: list[dict], quiet: list[dict], fillers: list[dict], paused: list[dict], erle: float | None, path: EchoPath
) -> dict:
    stopped = [c["silent_after_ms"] / 1000 for c in cases if c["silent_after_ms"] is not None]
    held = [f["held_ms"] / 1000 for f in fillers if f["held_ms"] is not None]
    return {
        "echo_path": {"delay_ms": path.delay_ms, "rt60_s": path.rt60_s, "clip": path.clip},
        "speaker_silent_after_onset_ms": percentiles_ms(stopped) if stopped else None,
        "not_stopped": sum(c["silent_after_ms"] is None for c in cases),
        # the mouth closes on the avatar's first frame after the pause; negative: before the sound ended
        "mouth_closed_after_sound_ms": percentiles_ms(
            [c["mouth_after_sound_ms"] / 1000 for c in cases if c["mouth_after_sound_ms"] is not None]
        )
        if stopped
        else None,
        "same_intent": f"{sum(c['same_intent'] for c in cases)}/{len(cases)}",
        "self_interruptions": f"{sum(q['paused'] for q in quiet)}/{len(quiet)} replies",
        "erle_db": erle,
        "backchannels_went_on": f"{sum(f['went_on'] for f in fillers)}/{len(fillers)}",
        # how long a backchannel kept the reply waiting: from the pause to the reply going on
        "backchannel_held_ms": percentiles_ms(held) if held else None,
        "cases": cases,
        "backchannel_cases": fillers,
        "paused_heard_whole": f"{sum(p['whole'] for p in paused)}/{len(paused)}",
        "paused_cases": paused,
    }


class _EchoRun:
    """One conversation, one room, a microphone fed in real time."""

    def __init__(self, app: App, settings, questions: list[Question], level: float, rng: random.Random) -> None:
        self.events: list[tuple[float, object]] = []
        self.conversation = app.conversation(
            self._speaker,
            build_engines=False,
            settings=settings,
            keep_turns=None,
            observer=lambda m: self.events.append((time.monotonic(), m)),
            hears_speaker=True,
        )
        if self.conversation.echo is None or self.conversation.bargein is None:
            raise InputError(
                'bench bargein needs the echo canceller: set [bargein] echo_canceller = "webrtc" '
                "and reinstall orin-avatar, which builds it"
            )
        visitor = float(np.median([active_rms(q.audio) for q in questions]))
        dialogue = self.conversation.dialogue  # the reference answer, taken without a turn in the visit's memory
        reference = self.conversation.speech.audio_of(dialogue.intents[questions[1].intent].answer)
        path = EchoPath(echo_db=level, delay_ms=round(rng.uniform(5, 60)), seed=rng.randrange(1000))
        self.room = EchoRoom(path, visitor, reference, self.speaker.sample_rate)
        self.speaker.card = self.room.play
        self.plays: list[tuple[float, int, int]] = []  # per block: when, microphone sample heard until, position then
        self.speaker.taps.append(self._played)
        self.clock = MicrophoneClock(realtime=True)
        self._warm_up(settings.bargein.startup_phrase)

    def _warm_up(self, phrase: str) -> None:
        """Say the start-up phrase as the daemon does, the microphone already running (fed here while
        another thread makes the phrase: a microphone that stalls meanwhile puts the far end off its echo)."""
        self.feed(np.zeros(SPEECH_RATE // 2, np.float32))
        saying = threading.Thread(target=self.conversation.warm_up, args=(phrase,), name="start-up phrase")
        saying.start()
        self.silence_until(lambda: not saying.is_alive() and not self.conversation.warming_up)
        saying.join()

    def _speaker(self, rate: int) -> RecordingSpeaker:
        self.speaker = RecordingSpeaker(rate, realtime=True)
        return self.speaker

    def _played(self, samples: np.ndarray, fresh: bool, at: float | None) -> None:
        self.plays.append((time.monotonic(), self.room.heard_until, self.room.position))

    def feed(self, audio: np.ndarray) -> None:
        """`audio` (whole frames of it) heard in 10 ms blocks at the microphone's pace, as a sound card gives them."""
        for block in self.clock.pieces(audio[: len(audio) // FRAME * FRAME], BLOCK):
            self.conversation.feed(self.room.capture(block), self.room.captured_at)

    def silence_until(self, done: Callable[[], bool], timeout: float = WAIT_S) -> bool:
        deadline = time.monotonic() + timeout
        silence = np.zeros(FRAME, np.float32)
        while not done():
            if time.monotonic() > deadline:
                return False
            self.feed(silence)
        return True

    def ask(self, question: Question) -> None:
        """Say `question` and wait for its answer to be playing."""
        count = len(self.conversation.turns)
        self.feed(question.audio)
        self.silence_until(
            lambda: any(t.chunks for t in list(self.conversation.turns)[count:]) and self.speaker.played > 0
        )

    def settle(self) -> None:
        self.silence_until(self.conversation.idle)
        self.feed(np.zeros(SPEECH_RATE // 2, np.float32))

    def intent_in_silence(self, question: Question) -> str:
        transcript = self.conversation.asr.transcribe(question.audio).text
        return self.conversation.dialogue.rank(transcript)[0][0] if transcript else ""

    def into_answer(self, question: Question, after_s: float) -> None:
        """Ask `question` and let its answer play `after_s` seconds."""
        self.ask(question)
        self.feed(np.zeros(int(after_s * SPEECH_RATE) // FRAME * FRAME, np.float32))

    def interrupt(self, first: Question, second: Question, after_s: float, expected: str) -> dict:
        self.into_answer(first, after_s)
        count, mark = len(self.conversation.turns), len(self.events)
        onset = self.room.position + _speech_onset(second.audio)
        onset_at = time.monotonic() + _speech_onset(second.audio) / SPEECH_RATE
        self.feed(second.audio)
        self.silence_until(lambda: any(t.barged_in and t.done.is_set() for t in list(self.conversation.turns)[count:]))
        self.settle()
        paused = next((when for when, m in self.events[mark:] if isinstance(m, ReplyPaused)), None)
        turns = list(self.conversation.turns)
        heard = [t for t in turns[count:] if t.barged_in]
        # a question heard with the one being answered, whose reply then goes on (it answers both): that reply's answer
        answer = heard[0].answer or (turns[count - 1].answer if heard[0].rejoined else None) if heard else None
        answered = (answer.about or answer.intent) if answer else ""  # an ask-back: its guess
        silent_at = self._silent_after(paused)
        return {
            "asked": first.name,
            "interrupted_by": second.name,
            "after_s": round(after_s, 2),
            "paused_after_ms": None if paused is None else round((paused - onset_at) * 1000),
            "silent_after_ms": None if silent_at is None else round((silent_at[1] - onset) * 1000 / SPEECH_RATE),
            "mouth_after_sound_ms": None if silent_at is None else round((paused + 1 / FPS - silent_at[0]) * 1000),
            "transcript": heard[0].transcript if heard else "",
            "intent": answered,
            "expected": expected,
            "same_intent": answered == expected,
        }

    def _silent_after(self, paused: float | None) -> tuple[float, int] | None:
        """(when, microphone sample) the speaker's sound ended after the pause: the last block before its
        first gap (the faded one); None if it never went quiet."""
        if paused is None:
            return None
        after = [p for p in self.plays if p[0] >= paused]
        for (when, heard_until, position), following in zip(after, after[1:] + [None]):
            if following is None or following[0] - when > GAP_S:
                return when + (heard_until - position) / SPEECH_RATE, heard_until
        return None

    def quiet(self, question: Question) -> dict:
        mark = len(self.events)
        self.ask(question)
        self.settle()
        paused = any(isinstance(m, ReplyPaused) for _, m in self.events[mark:])
        return {"asked": question.name, "paused": paused}

    def backchannel(self, question: Question, filler: np.ndarray, after_s: float) -> dict:
        mark = len(self.events)
        self.into_answer(question, after_s)
        self.feed(filler)
        self.settle()
        messages = [m for _, m in self.events[mark:]]
        paused = any(isinstance(m, ReplyPaused) for m in messages)
        turns = list(self.conversation.turns)[-3:]
        cut = any(t.interrupted for t in turns)
        held = [when for when, m in self.events[mark:] if isinstance(m, (ReplyPaused, ReplyResumed))][:2]
        return {
            "asked": question.name,
            "paused": paused,
            "heard": [t.transcript for t in turns if t.barged_in],
            "went_on": not cut and (not paused or any(isinstance(m, ReplyResumed) for m in messages)),
            "held_ms": round((held[1] - held[0]) * 1000) if len(held) == 2 else None,
        }

    def hesitant(self, first: Question, case: PauseCase, after_s: float) -> dict:
        """A question with a hesitation said over `first`'s answer: heard whole if the first utterance it
        started ended after its last sound (a piece judged alone lets the reply go on, or is answered half)."""
        self.into_answer(first, after_s)
        count, start = len(self.conversation.turns), self.conversation.heard_samples
        self.feed(case.audio[: len(case.audio) // FRAME * FRAME])
        self.settle()
        heard = [t for t in list(self.conversation.turns)[count:] if t.barged_in]
        first_heard = heard[0].utterance if heard else None
        return {
            "asked": first.name,
            "said": case.text,
            "voice": case.voice,
            "pause_ms": case.pause_ms,
            "after_s": round(after_s, 2),
            "utterances": len(heard),
            "transcripts": [t.transcript for t in heard],
            "whole": first_heard is not None and first_heard.speech_end >= start + case.speech_end - FRAME,
        }

    def close(self) -> None:
        self.conversation.close()
        self.speaker.close()


def _speech_onset(audio: np.ndarray) -> int:
    """First sample of the first 10 ms block of `audio` within 30 dB of its loudest block."""
    power = block_power(audio)
    return int(np.argmax(power > power.max() * 1e-3)) * BLOCK
