"""The words before a pause: the ones after which a visitor has not finished their sentence, and
questions the robot is sure of (the real dialogue over the embedded knowledge base)."""

import dataclasses

import pytest

from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.pause_words import Words, judge_words, leaves_open
from device.settings import load_settings

ENDPOINT = dataclasses.replace(load_settings().endpoint, wait_after_open_words=True, end_on_known_question=True)


@pytest.mark.parametrize(
    "transcript",
    [
        "Where is the?",
        "Is it possible to.",
        "I was wondering if,",
        "Is there an",
        "We are looking for the.",
        "Tickets for me and",
        "Excuse me,",
        "Excuse me.",
    ],
)
def test_an_article_a_conjunction_or_to_last_or_an_opener_leaves_the_sentence_open(transcript):
    assert leaves_open(transcript)


@pytest.mark.parametrize(
    "transcript",
    [
        "Where is the exit?",
        "What is this for?",
        "Do you have any?",
        "Can you repeat that?",
        "Where are you from?",
        "",
        "Mm-hm.",
        "Hello,",
        "Excuse me, where are the restrooms?",
    ],
)
def test_a_question_that_can_end_there_does_not(transcript):
    assert not leaves_open(transcript)


@pytest.fixture(scope="module")
def dialogue(text_encoder):
    return Dialogue(text_encoder, load_knowledge(), load_settings().dialogue)


@pytest.mark.parametrize(
    "transcript, expected",
    [
        ("Excuse me, where are the restrooms", Words.KNOWN_QUESTION),  # the bundled visit's, as recognised
        ("Do you have free Wi-Fi here?", Words.KNOWN_QUESTION),
        ("Excuse me,", Words.OPEN),  # its pause must be waited out: the question comes after it
        ("Is there a place", Words.OTHER),  # the dialogue's guess (food, 0.56) is not sure enough to end on
        ("What time", Words.OTHER),  # the time, sure (0.87), but an action: it starts "What time do you open?"
        ("Hello,", Words.KNOWN_QUESTION),  # a greeting: wrong, it costs little
        ("Where is the", Words.OPEN),
        ("", Words.OTHER),
    ],
)
def test_a_question_the_robot_is_sure_of_is_known_and_a_guess_or_a_start_is_not(dialogue, transcript, expected):
    assert judge_words(transcript, ENDPOINT, dialogue.knows) is expected


def test_known_questions_are_judged_only_when_asked(dialogue):
    off = dataclasses.replace(ENDPOINT, end_on_known_question=False)
    assert judge_words("Do you have free Wi-Fi here?", off, dialogue.knows) is Words.OTHER


def test_words_judged_at_a_pause_are_embedded_once_for_their_answer(text_encoder):
    embedded = []

    class Counting:  # the real encoder, counting the texts it embeds
        def embed(self, texts, between=lambda: None):
            embedded.extend(texts)
            return text_encoder.embed(texts, between)

    dialogue = Dialogue(Counting(), load_knowledge(), load_settings().dialogue)
    embedded.clear()  # the knowledge base's examples
    assert dialogue.knows("Do you have free Wi-Fi here?")
    assert dialogue.answer("Do you have free Wi-Fi here?").intent == "wifi"
    assert dialogue.answer("Where are the restrooms?").intent == "restrooms"
    assert embedded == ["Do you have free Wi-Fi here?", "Where are the restrooms?"]
