"""The turn state: one owner for the reply that the turns, speech and microphone threads act on."""

import threading

from device.conversation.turn_state import Phase, TurnState


def test_a_reply_starts_only_when_none_is_going_and_the_speaker_is_quiet():
    state = TurnState()
    assert not state.start("first", threading.Event(), speaker_busy=True)
    assert state.start("first", threading.Event(), speaker_busy=False)
    assert not state.start("second", threading.Event(), speaker_busy=False)
    assert state.speaking_turn == "first" and state.replying
    state.finished("first")
    assert not state.replying and state.start("second", threading.Event(), speaker_busy=False)


def test_speech_pauses_a_reply_once_and_it_goes_on_when_resumed():
    state = TurnState()
    assert state.pause() is None  # nothing to pause
    state.start("reply", threading.Event(), speaker_busy=False)
    assert state.pause() == "reply"
    assert state.pause() is None  # held already
    assert state.phase(hearing=True, answering=False) == Phase.INTERRUPTED
    assert state.resume() == "reply"
    assert state.pause() == "reply"  # it can be paused again
    assert state.resume() == "reply"
    assert state.phase(hearing=False, answering=True) == Phase.SPEAKING


def test_cancel_reaches_the_replys_own_event_and_waiting_ends_when_its_thread_is_done():
    state = TurnState()
    cancel = threading.Event()
    state.start("reply", cancel, speaker_busy=False)
    state.cancel()
    assert cancel.is_set()
    assert not state.wait_finished(0.05)
    threading.Timer(0.05, state.finished, args=("reply",)).start()
    assert state.wait_finished(5.0)
    assert state.phase(hearing=False, answering=False) == Phase.IDLE


def test_a_late_finish_of_an_old_reply_leaves_the_new_one_alone():
    state = TurnState()
    state.start("old", threading.Event(), speaker_busy=False)
    state.finished("old")
    state.start("new", threading.Event(), speaker_busy=False)
    state.finished("old")
    assert state.speaking_turn == "new"
    assert state.phase(hearing=True, answering=False) == Phase.SPEAKING
