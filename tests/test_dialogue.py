"""The dialogue on typed questions: knowledge base, built-ins, asking back, rephrasing, reload (the LLM:
test_llm.py; kb check and bench intents: test_kb_check.py)."""

import dataclasses
import datetime
import json

import pytest

from device.conversation.dialogue import ASK_BACK, NOT_IT_ANSWER, REPHRASE, REPHRASE_ANSWER, Dialogue
from device.conversation.knowledge import KnowledgeError, load_knowledge
from device.settings import load_settings
from tests.conftest import LIFTS, knowledge_file, run_cli

NOON = datetime.datetime(2026, 11, 29, 12, 5)


@pytest.fixture(scope="module")
def dialogue(text_encoder):
    return Dialogue(text_encoder, load_knowledge(), load_settings().dialogue, clock=lambda: NOON)


@pytest.mark.parametrize(
    "question, intent",
    [
        ("Where can I find a toilet?", "restrooms"),
        ("When does the centre close tonight?", "opening_hours"),
        ("How much do I pay to get in?", "tickets"),
        ("What's the password for the internet?", "wifi"),
        ("I lost my umbrella, can you help me?", "lost_and_found"),
        ("Are you a real person?", "who_are_you"),
        ("Hi!", "greeting"),
        ("Okay, thanks, bye.", "goodbye"),
    ],
)
def test_questions_reach_their_intent(dialogue, question, intent):
    assert dialogue.decide(question).intent == intent  # answered, or asked back about


def test_an_intent_two_of_whose_examples_agree_outranks_one_example_close_in_words(text_encoder, tmp_path):
    """A directions example ("Where are the lifts?") is the nearest to this question; two of
    accessibility's are the nearer on average. Each intent's score stays its nearest example's similarity."""
    dialogue = Dialogue(
        text_encoder, load_knowledge(knowledge_file(tmp_path / "kb.toml", LIFTS)), load_settings().dialogue
    )
    question = "Is there a lift for strollers and wheelchairs?"
    asked = text_encoder.embed([question])[0]
    nearest = {
        name: float((text_encoder.embed(list(intent.examples)) @ asked).max())
        for name, intent in dialogue.intents.items()
    }
    assert max(nearest, key=nearest.get) == "directions"  # what the nearest example alone chose
    ranking = dialogue.rank(question)
    assert ranking[0][0] == "accessibility" and dialogue.decide(question).intent == "accessibility"
    assert {name: score for name, score in ranking} == pytest.approx(nearest)


@pytest.mark.parametrize(
    "question",
    [
        "What is the boiling point of tungsten?",
        "Who won the football game yesterday?",
        "How old is the universe?",
        "Tell me a joke.",
    ],
)
def test_unrelated_question_gets_a_polite_rephrase(dialogue, question):
    answer = dialogue.answer(question)
    assert (answer.intent, answer.text, answer.source) == ("rephrase", REPHRASE_ANSWER, "fallback")


def test_builtins_time_date_repeat_stop(dialogue):
    assert dialogue.answer("What time is it?").text == "It is 12:05 PM."
    assert dialogue.answer("What is the date today?").text == "Today is Sunday, November 29."
    said = dialogue.answer("Where is the restroom?").text
    assert dialogue.answer("Sorry, can you repeat that?").text == said
    stop = dialogue.answer("Stop talking.")
    assert stop.intent == "stop" and stop.text == ""
    assert dialogue.answer("Say that again please.").text == said  # stop did not overwrite it


def _unsure(dialogue, question):
    """`question` scores between the thresholds (the test would mean nothing otherwise)."""
    decision = dialogue.decide(question)
    assert dialogue.settings.threshold <= decision.score < dialogue.settings.confident_threshold, decision
    return decision


def test_unsure_it_asks_back_and_a_yes_gets_the_answer(dialogue):
    guess = _unsure(dialogue, "Where are the ladies?")
    asked = dialogue.answer("Where are the ladies?")
    assert (asked.intent, asked.source, asked.about, asked.text) == (
        ASK_BACK,
        "ask_back",
        "restrooms",
        "Did you mean the restrooms?",
    )
    assert guess.intent == "restrooms"
    answer = dialogue.answer("Yes, please.")
    assert (answer.intent, answer.source) == ("restrooms", "knowledge")
    assert answer.text == dialogue.intents["restrooms"].answer
    assert dialogue.answer("Yes.").intent != "restrooms"  # the guess was used up


def test_a_no_to_an_ask_back_asks_what_they_want_and_a_longer_reply_is_a_question(dialogue):
    dialogue.answer("Where are the ladies?")
    assert (dialogue.answer("No.").text, dialogue.decide("No.").kind) == (NOT_IT_ANSWER, REPHRASE)
    dialogue.answer("Where are the ladies?")
    assert dialogue.answer("No, where can I eat something?").intent == "food"
    dialogue.answer("Where are the ladies?")
    dialogue.new_visit()  # the next visitor's "yes" answers nothing of the last one's
    assert dialogue.answer("Yes.").intent != "restrooms"


def test_unsure_of_a_repeat_it_asks_back_and_a_yes_repeats_the_reply_before_the_question(text_encoder):
    dialogue = Dialogue(text_encoder, load_knowledge(), load_settings().dialogue, clock=lambda: NOON)
    said = dialogue.answer("Where is the restroom?").text
    guess = _unsure(dialogue, "Sorry, I missed what you said.")
    assert guess.intent == "repeat"
    asked = dialogue.answer("Sorry, I missed what you said.")
    assert (asked.source, asked.about, asked.text) == ("ask_back", "repeat", "Did you mean that I say it again?")
    assert dialogue.answer("Yes.").text == said  # not the ask-back's own question


def test_an_unsure_action_is_never_done(dialogue):
    """ "How old is the universe?" is closest to the time; telling it is worse than asking again."""
    decision = dialogue.decide("How old is the universe?")
    assert (decision.intent, decision.kind) == ("time", REPHRASE) and decision.score >= dialogue.settings.threshold
    assert dialogue.answer("How old is the universe?").text == REPHRASE_ANSWER


def test_asking_back_can_be_turned_off(text_encoder):
    settings = dataclasses.replace(load_settings().dialogue, confident_threshold=0.35)
    plain = Dialogue(text_encoder, load_knowledge(), settings)
    answer = plain.answer("Where are the ladies?")
    assert (answer.intent, answer.source) == ("restrooms", "knowledge")


def test_reload_keeps_the_old_knowledge_when_the_new_is_broken(text_encoder, tmp_path):
    path = tmp_path / "kb.toml"
    path.write_text(
        '[[intent]]\nname = "parrots"\nexamples = ["Do you have parrots?"]\nanswer = "Yes, in the aviary."\n'
    )
    dialogue = Dialogue(
        text_encoder, load_knowledge(path), dataclasses.replace(load_settings().dialogue, knowledge=str(path))
    )
    assert dialogue.answer("Are there any parrots here?").intent == "parrots"
    path.write_text('[[intent]]\nname = "parrots"\nexamples = ["Do you have parrots?"]\n')
    with pytest.raises(KnowledgeError, match="has no 'answer'"):
        dialogue.reload(path)
    assert dialogue.answer("Are there any parrots here?").text == "Yes, in the aviary."


def test_ask_cli_json():
    result = run_cli("ask", "Is there somewhere to eat?", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["intent"] == "food" and report["answer"].startswith("The cafe")
    assert report["ranking"][0] == {"intent": "food", "score": report["score"]}
