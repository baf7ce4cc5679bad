"""Endpointing: VAD probabilities of 32 ms frames in, speech start / pause / utterance out.

Speech starts after `onset` consecutive speech frames; the utterance ends after a hangover of
silence; a monologue is cut at `max_utterance_s`. A short silence after speech emits `SpeechPaused`
so recognition (and the end-of-turn model) can start speculatively while the hangover runs out,
and `SpeechResumed` voids it if the visitor goes on.

How long a pause must last is the turn-taking policies' call (device/conversation/turn_taking.py): the
fixed hangover until the end-of-turn model's verdict (`judge`) or the judgement of the pause's
speculative words (`heard`) arrives, then theirs. The endpointer has one owner, the feeding thread,
which hands it those messages; a held reply's hold comes the same way (`hold_for`).
"""

from __future__ import annotations

import numpy as np

from engines.model_specs import FRAME

from device.conversation.noise_floor import NoiseFloor, level_db
from device.conversation.pause_words import Words
from device.conversation.turn_taking import Pause, pause_frames, pause_policies
from device.messages import EndOfTurnVerdict, SpeechPaused, SpeechResumed, SpeechStarted, Utterance
from device.settings import EndpointSettings

Event = SpeechStarted | SpeechPaused | SpeechResumed | Utterance

# Speculative recognition starts at the first silent frame. A one-frame VAD dip between syllables
# starts one too, which the speech after it stops (the turn loop, at its next decoding step), so the
# real pause's recognition waits at most for the dip's encoder call. Recognising 1-5 s of speech takes
# 100-350 ms here, and the words end a known question's pause (`min_hangover_ms`) only once they are
# in: 32 rather than 64 ms took the bundled visit's endpoint p50 per question 0-32 ms lower, and the
# tuning pauses were unchanged (docs/lab/end-of-turn.md).
SPECULATE_AFTER_MS = 32
FLOOR_WINDOW_MS, FLOOR_PERCENTILE = 5000, 10  # the noise floor: the 10th percentile of the last 5 s


class Endpointer:
    def __init__(self, settings: EndpointSettings, judged: bool = False) -> None:
        """`judged`: an end-of-turn model will send its verdict on each pause (`judge`)."""
        self.settings = settings
        self.policies = pause_policies(settings, judged)
        self._onset = settings.frames(settings.onset_ms)
        self._pre_roll = settings.frames(settings.pre_roll_ms)
        self._max_frames = settings.frames(settings.max_utterance_s * 1000)
        self._speculate_after = min(settings.frames(SPECULATE_AFTER_MS), settings.frames(settings.hangover_ms))
        self._floor = NoiseFloor(settings.frames(FLOOR_WINDOW_MS), FLOOR_PERCENTILE)
        self.reset()

    def reset(self) -> None:
        self._frames: list[np.ndarray] = []  # pre-roll while idle, the utterance while speaking
        self._levels: list[float] = []  # their levels (dBFS)
        self._first_frame = 0  # stream frame index of self._frames[0]
        self._position = 0  # frames seen
        self._speech_run = 0
        self._silence_run = 0
        self._speaking = False
        self._last_speech = 0  # stream frame index after the last speech frame
        self._last_voiced = 0  # after the last frame the VAD called speech, the floor's margin aside (every
        # speech frame is one, so never before _last_speech)
        self._speech_start = 0  # stream sample where the current speech began
        self._complete: bool | None = None  # the end-of-turn verdict on the current pause, once it arrived
        self._words: Words | None = None  # what the words before the current pause are, once heard
        self._least_pause = 0  # frames of silence the current utterance waits at least (`hold_for`)
        self._quiet = False  # the current pause's fixed hangover is quiet_hangover_ms

    @property
    def speaking(self) -> bool:
        return self._speaking

    def push(
        self, frame: np.ndarray, probability: float, over_floor: bool = True, on_axis_db: float | None = None
    ) -> list[Event]:
        """Feed one frame and its VAD probability; return what it decided. `over_floor` False: speech
        need not be louder than the noise floor (while the robot speaks, what the echo canceller
        leaves and its suppression of the visitor in double talk are no hall). `on_axis_db`: a
        microphone array's beam over its microphones for this frame; with it, speech must also come
        from where the beam points (the hall's talk comes from everywhere), when the floor's margin is
        asked: while the robot speaks its own voice, before the canceller, is most of what the beam hears."""
        index = self._position
        self._position += 1
        self._frames.append(frame)
        self._levels.append(level_db(frame))
        loud = self._over_the_floor(self._levels[-1])  # every frame: the floor is learnt from all of them
        toward = on_axis_db is None or on_axis_db >= self.settings.array_min_on_axis_db
        voiced = probability >= self.settings.vad_threshold
        is_speech = voiced and ((loud and toward) or not over_floor)
        if not self._speaking:
            return self._idle(index, is_speech)
        if voiced:
            self._last_voiced = index + 1
        return self._in_speech(index, is_speech)

    def _over_the_floor(self, level: float) -> bool:
        """Louder than the hall by the margin the settings ask (always, when they ask none); by
        `level_hysteresis_db` less once an utterance has started (through an array's beam, where a
        frame must also come from where it points, a visitor's quieter words then stay in their
        question instead of cutting it in two: docs/lab/hearing.md)."""
        margin = self.settings.min_level_over_floor_db
        floor = self._floor.update(level)
        going_on = self.settings.level_hysteresis_db if self._speaking else 0.0
        return margin == 0 or level >= floor + margin - going_on

    def _idle(self, index: int, is_speech: bool) -> list[Event]:
        self._speech_run = self._speech_run + 1 if is_speech else 0
        keep = self._pre_roll + self._speech_run
        if len(self._frames) > keep:
            drop = len(self._frames) - keep
            del self._frames[:drop]
            del self._levels[:drop]
            self._first_frame += drop
        if self._speech_run < self._onset:
            return []
        self._speaking, self._silence_run = True, 0
        self._last_speech = self._last_voiced = index + 1
        self._speech_start = (index + 1 - self._speech_run) * FRAME
        return [SpeechStarted(self._speech_start)]

    def _in_speech(self, index: int, is_speech: bool) -> list[Event]:
        events: list[Event] = []
        if is_speech:
            if self._silence_run >= self._speculate_after:
                events.append(SpeechResumed())
            self._silence_run, self._complete, self._words = 0, None, None
            self._last_speech = index + 1
        else:
            self._silence_run += 1
            if self._silence_run == 1:
                self._quiet = self._in_a_quiet_room()
            if self._silence_run == self._speculate_after:
                events.append(
                    SpeechPaused(
                        self._audio_until(index + 1), self._last_speech * FRAME, (index + 1 - self._last_voiced) * FRAME
                    )
                )
        if self._silence_run >= self._pause_limit():
            events.append(self._finish(index, truncated=False))
        elif len(self._frames) >= self._max_frames:
            events.append(self._finish(index, truncated=True))
        return events

    def judge(self, verdict: EndOfTurnVerdict) -> list[Event]:
        """The end-of-turn model's verdict on a pause; the utterance if that pause has now lasted long
        enough. A verdict on a pause that is over (speech resumed, or the utterance already ended) is
        ignored."""
        if not self._in_pause(verdict.speech_end):
            return []
        self._complete = verdict.complete
        return self._end_if_long_enough()

    def heard(self, speech_end: int, words: Words) -> list[Event]:
        """The speculative words of the pause after `speech_end` are in: OPEN ones make the pause last
        `max_hangover_ms`, a KNOWN_QUESTION ends it after `min_hangover_ms`."""
        if not self._in_pause(speech_end):
            return []
        self._words = words
        return self._end_if_long_enough()

    def _in_pause(self, speech_end: int) -> bool:
        return self._speaking and self._silence_run >= self._speculate_after and speech_end == self._last_speech * FRAME

    def _end_if_long_enough(self) -> list[Event]:
        if self._silence_run >= self._pause_limit():
            return [self._finish(self._position - 1, truncated=False)]
        return []

    def hold_for(self, ms: int) -> None:
        """The current utterance ends only after at least `ms` of silence (its pauses included): a reply
        the visitor's speech holds (barge-in) waits for their whole question."""
        self._least_pause = self.settings.frames(ms)

    def _pause_limit(self) -> int:
        """Frames of silence that end the current pause."""
        pause = Pause(self._quiet, self._complete, self._words)
        return max(pause_frames(self.policies, pause), self._least_pause)

    def _in_a_quiet_room(self) -> bool:
        """The loudest tenth of the utterance's frames stands `quiet_over_floor_db` over the noise floor.
        The fixed hangover's last frame is for a hall, where a visitor's quieter syllables fall under
        the floor's margin and a shorter wait splits their question (docs/lab/end-of-turn.md); a visitor
        that far over the room has no syllable near the margin."""
        spoken = self._levels[self._speech_start // FRAME - self._first_frame : self._last_speech - self._first_frame]
        return float(np.percentile(spoken, 90)) - self._floor.level >= self.settings.quiet_over_floor_db

    def _audio_until(self, frame_index: int) -> np.ndarray:
        return np.concatenate(self._frames[: frame_index - self._first_frame])

    def _finish(self, index: int, truncated: bool) -> Utterance:
        """The utterance's audio runs on to the last frame the VAD called speech, though the floor's
        margin did not count it: in a hall the margin hides a visitor's quieter last syllables, and
        recognition without them loses words ("wall" for "wallet"; docs/lab/hearing.md). Where it ended
        (`speech_end`) is still the margin's, so a hall's talk holds no utterance open."""
        end = index + 1 if truncated else self._last_speech
        audio = self._audio_until(index + 1 if truncated else self._last_voiced)
        utterance = Utterance(
            audio, self._speech_start, end * FRAME, (index + 1) * FRAME, self._first_frame * FRAME, truncated
        )
        position = self._position
        self.reset()
        self._position = self._first_frame = position
        return utterance
