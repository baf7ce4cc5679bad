"""Word boosting: recognition leans toward the knowledge base's words, on Moonshine's own vocabulary
and on a question said into a hall's babble."""

from __future__ import annotations

import dataclasses

import numpy as np

from device.app import App
from device.bench.hall import Hall, load_questions
from device.bench.hearing import SEED, at_speech_level, clip_length, question_heard
from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.models.asr import read_vocabulary, words
from device.models.word_boost import CANDIDATES, SPACE, WordBoost, domain_words


def _ids(vocabulary: list[bytes], *pieces: str) -> list[int]:
    return [vocabulary.index(p.replace(" ", SPACE).encode()) for p in pieces]


def test_a_candidate_that_spells_a_domain_word_wins_over_a_near_miss(store):
    vocabulary = read_vocabulary(store.path("asr-tokenizer.bin"))
    wife, wi, fi, fe = _ids(vocabulary, " wife", " Wi", "Fi", "fe")
    boost = WordBoost({"wifi"}, vocabulary, bonus=2.0)
    logits = np.zeros(len(vocabulary), np.float32)
    logits[[wife, wi]] = 5.0, 4.0
    assert boost.apply(logits, []).argmax() == wi  # " Wi" begins "wifi" (case does not matter)
    logits[:] = 0.0
    logits[[fi, fe]] = 3.0, 4.0
    assert boost.apply(logits, [wi]).argmax() == fi  # after " Wi", "Fi" spells it, "fe" does not
    assert boost.apply(logits, [wife]).argmax() == fe  # after " wife" nothing continues a domain word
    assert logits[fi] == 3.0  # the decoder's logits are left as they were


def test_a_token_outside_the_best_few_is_never_boosted(store):
    vocabulary = read_vocabulary(store.path("asr-tokenizer.bin"))
    (wi,) = _ids(vocabulary, " Wi")
    logits = np.zeros(len(vocabulary), np.float32)
    logits[1000:1000 + CANDIDATES] = 5.0  # ten tokens ahead of it
    logits[wi] = 4.0
    boosted = WordBoost({"wifi"}, vocabulary, bonus=100.0).apply(logits, [])
    assert boosted[wi] == 4.0 and boosted.argmax() >= 1000


def test_domain_words_are_the_knowledge_base_words_of_three_letters_or_more(text_encoder):
    dialogue = Dialogue(text_encoder, load_knowledge(), App().settings.dialogue)
    assert {"wifi", "toilet", "restrooms", "parking"} <= dialogue.words
    assert not {w for w in dialogue.words if len(w) < 3}
    assert domain_words(["Where's the Wi-Fi?"]) == {"where's", "the"}  # "wi", "fi": too short alone


def test_in_babble_the_boost_hears_the_knowledge_base_word_plain_decoding_misses(store, asr, vad, text_encoder):
    # The hall evaluation's tuning split, its third question ("Where can I find a toilet?"), 10 dB of
    # babble, as `bench hearing` mixes it: plain greedy decoding hears "this portal".
    app = App(store_dir=store.root)
    dialogue = Dialogue(text_encoder, load_knowledge(), app.settings.dialogue)
    questions, talkers = load_questions(store, "tuning", limit=3)
    hall, rng = Hall(len(talkers), SEED), np.random.default_rng(SEED)
    for question in questions:  # the babble of each question in turn, as the bench draws it
        speech = at_speech_level(hall.visitor(question.audio))
        babble = hall.babble(talkers, clip_length(speech), rng)
    settings = dataclasses.replace(app.settings.endpoint, min_level_over_floor_db=12.0)
    utterance, _ = question_heard(question, speech, babble, 10.0, vad, settings)
    assert "toilet" in words(question.text)
    try:
        plain = words(asr.transcribe(utterance.audio).text)
        asr.boost_words(dialogue.words, 2.0)
        boosted = words(asr.transcribe(utterance.audio).text)
    finally:
        asr.boost_words(set(), 0.0)
    assert "toilet" not in plain and "toilet" in boosted, (plain, boosted)
