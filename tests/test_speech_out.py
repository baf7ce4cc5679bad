"""Speech out: a reply's sentences in pieces as they are made, the cache's whole, what a cut reply did not say."""

import threading

import numpy as np

from device.conversation.speech_out import SpeechOut, split_sentences, unsaid

REPLY = "Hello there. The restrooms are on the second floor, next to the elevators."


def _chunks(speech: SpeechOut) -> list:
    return list(speech.chunks(7, [REPLY], threading.Event()))


def test_a_sentence_s_first_chunk_carries_its_text_and_mouth_shapes(tts):
    chunks = _chunks(SpeechOut(tts, cache=False))
    firsts = [c for c in chunks if c.text]
    assert [c.text for c in firsts] == split_sentences(REPLY)
    assert len(chunks) > len(firsts) + 1  # the long sentence came in pieces, then the end
    assert chunks[-1].last and not chunks[-1].audio.size and not any(c.last for c in chunks[:-1])
    assert [c.start for c in chunks[1:]] == list(np.cumsum([len(c.audio) for c in chunks[:-1]]))
    assert all(c.visemes for c in firsts) and not any(c.visemes for c in chunks if not c.text)
    second = firsts[1]
    last = second.visemes[-1]  # the whole sentence's shapes, beyond its first piece, to the rest at its end
    assert (
        second.visemes[0].sample >= second.start and second.start + len(second.audio) < last.sample <= chunks[-1].start
    )
    assert last.shape == "rest"


def test_a_cached_sentence_comes_whole_with_the_sound_its_pieces_make(tts):
    pieces = _chunks(SpeechOut(tts, cache=False))
    cached = SpeechOut(tts)
    cached.prepare([REPLY])
    cached.wait_prepared(60)
    whole = _chunks(cached)
    assert [c.text for c in whole[:-1]] == split_sentences(REPLY)
    assert np.array_equal(np.concatenate([c.audio for c in whole]), np.concatenate([c.audio for c in pieces]))


def test_a_cut_reply_did_not_say_the_sentence_it_was_cut_in(tts):
    chunks = _chunks(SpeechOut(tts, cache=False))
    first, second = split_sentences(REPLY)
    second_first = [c for c in chunks if c.text][1]
    second_start = second_first.start
    within = chunks[-2].start  # the second sentence's last piece: its first pieces were played
    assert unsaid(chunks, within, REPLY) == second
    assert unsaid(chunks, second_start - 1, REPLY) == REPLY
    assert unsaid(chunks, second_start, REPLY) == second
    assert unsaid(chunks, chunks[-1].start, REPLY) == ""
    # an LLM's stream cut while the second sentence was being made: its sentences are those that came
    came = chunks[: chunks.index(second_first) + 1]
    assert unsaid(came, within, None) == second and unsaid(came[:1], 0, None) == first
