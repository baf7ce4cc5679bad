"""The dialogue on typed questions: knowledge base, built-ins, rephrasing, reload (the LLM: test_llm.py)."""

import datetime
import json

import pytest

from device.conversation.dialogue import REPHRASE_ANSWER, Dialogue, DialogueSettings
from device.conversation.knowledge import KnowledgeError, load_knowledge
from tests.conftest import run_cli

NOON = datetime.datetime(2026, 11, 29, 12, 5)


@pytest.fixture(scope="module")
def dialogue(text_encoder):
    return Dialogue(text_encoder, load_knowledge(), DialogueSettings(knowledge="", threshold=0.35), clock=lambda: NOON)


@pytest.mark.parametrize("question, intent", [
    ("Where can I find a toilet?", "restrooms"),
    ("When does the centre close tonight?", "opening_hours"),
    ("How much do I pay to get in?", "tickets"),
    ("What's the password for the internet?", "wifi"),
    ("I lost my umbrella, can you help me?", "lost_and_found"),
    ("Are you a real person?", "who_are_you"),
    ("Hi!", "greeting"),
    ("Okay, thanks, bye.", "goodbye"),
])
def test_questions_reach_their_intent(dialogue, question, intent):
    assert dialogue.answer(question).intent == intent


@pytest.mark.parametrize("question", ["What is the boiling point of tungsten?", "Who won the football game yesterday?",
                                      "How old is the universe?", "Tell me a joke."])
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


def test_reload_keeps_the_old_knowledge_when_the_new_is_broken(text_encoder, tmp_path):
    path = tmp_path / "kb.toml"
    path.write_text('[[intent]]\nname = "parrots"\nexamples = ["Do you have parrots?"]\nanswer = "Yes, in the aviary."\n')
    dialogue = Dialogue(text_encoder, load_knowledge(path), DialogueSettings(knowledge=str(path), threshold=0.35))
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
