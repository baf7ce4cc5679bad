"""Open words: the last words after which a visitor has not finished their sentence."""

import pytest

from device.conversation.open_words import leaves_open


@pytest.mark.parametrize("transcript", ["Where is the?", "Is it possible to.", "I was wondering if,", "Is there an",
                                        "We are looking for the.", "Tickets for me and"])
def test_an_article_a_conjunction_or_to_last_leaves_the_sentence_open(transcript):
    assert leaves_open(transcript)


@pytest.mark.parametrize("transcript", ["Where is the exit?", "What is this for?", "Do you have any?",
                                        "Can you repeat that?", "Where are you from?", "", "Mm-hm."])
def test_a_question_that_can_end_there_does_not(transcript):
    assert not leaves_open(transcript)
