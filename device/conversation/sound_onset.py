"""A sound starting on the echo-cancelled microphone, 10 ms at a time: the first sign that the visitor
talks over a reply.

Silero VAD judges 32 ms frames, and barge-in waits for `min_speech_ms` of them; through the echo
canceller in double talk its third speech frame came 250-550 ms (p50) after a visitor's onset
(offline, through the echo room, 0 to +12 dB of echo). What the canceller leaves of the robot's
voice peaked at -58 to -65 dBFS there, while a visitor's first syllable rose 15 dB over the room's
level within 80-125 ms (p50; docs/lab/bargein.md has the tables). So three 10 ms blocks in a row that
much louder than the room's level during replies (reply_room.py) hold the reply at once, and the
VAD must then confirm it is speech (listening.py). With the room's level at the 90th percentile
rather than a low one, a hall's talk 20 dB under the visitor paused 1-2 of 16 replies (9-13 of 16
on the 10th); in louder talk it simply stays quiet.
"""

from __future__ import annotations

# Loud blocks in a row: through the echo room at +12 dB, AEC3 let 20 ms of echo through where the
# reply's voice came back after a pause, twice in three runs of 16 replies (none over 30 ms).
RUN_BLOCKS = 3


class SoundOnset:
    """Feed the room's judgement of each block as it comes (`push`); True in the call whose blocks started a sound."""

    def __init__(self, margin_db: float) -> None:
        self.margin_db = margin_db
        self._run = 0
        self._told = False  # this run of loud blocks was reported

    def push(self, blocks: list[tuple[float, float]], judged: bool = True) -> bool:
        """`blocks`: (level, room level) of the 10 ms blocks heard since the last call (`ReplyRoom.hear`);
        True if a run of
        RUN_BLOCKS blocks `margin_db` over the room was reached in them, even one that ended within them
        (through the canceller in double talk a visitor's first syllable is often only 30-50 ms loud; the
        daemon's echo-room test that failed with this in CI did so on a simulated far end off its echo,
        since fixed: docs/lab/bargein.md, "The echo room as the sound card").
        A run that is loud in blocks not `judged` (the canceller settling) is never told, however long
        it goes on: it is taken for echo the canceller let through. Told when it went on past the
        settling, such a run paused a reply 0.32 s into it through the echo room at +6 dB (the daemon's
        test in CI); a visitor who starts then is heard by the VAD's speech once the canceller has settled."""
        started = False
        for level, room in blocks:
            loud = level > room + self.margin_db
            self._run, self._told = (self._run + 1, self._told or not judged) if loud else (0, False)
            if self._run >= RUN_BLOCKS and not self._told:  # judged per block: a short run may end within the call
                started = self._told = True
        return started
