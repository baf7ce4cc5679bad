"""`orin-avatar kb check` and `bench intents`: overlapping intents and questions that go wrong, scored
through the real text encoder."""

import json

from device.conversation.dialogue import Dialogue
from device.conversation.kb_check import claimed_examples
from device.conversation.knowledge import load_knowledge
from device.settings import load_settings
from tests.conftest import LIFTS, knowledge_file, run_cli


def test_the_bundled_knowledge_base_checks_clean():
    result = run_cli("kb", "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every example goes to its own intent" in result.stdout


def test_an_example_another_intent_claims_is_named_with_the_one_it_is_closer_to(text_encoder, tmp_path):
    path = knowledge_file(
        tmp_path / "kb.toml", {"world_clock": ("Is there a cafe in the tower?", "What time is it in Tokyo?")}
    )
    claimed = claimed_examples(Dialogue(text_encoder, load_knowledge(path), load_settings().dialogue))
    # without itself, "What time is it in Tokyo?" would go to the built-in time, not to its own intent
    assert [(c.intent, c.example, c.other, c.other_example) for c in claimed] == [
        ("world_clock", "What time is it in Tokyo?", "time", "What time is it?")
    ]
    assert claimed[0].score >= claimed[0].own_score


def test_an_example_is_named_exactly_when_the_dialogue_would_give_it_to_another_intent(text_encoder, tmp_path):
    """kb check ranks as the dialogue does: each example, left out, against the dialogue without it."""
    lift = "Is there a lift for strollers and wheelchairs?"
    intents = {**LIFTS, "accessibility": (*LIFTS["accessibility"], lift)}
    settings = load_settings().dialogue
    kb = knowledge_file(tmp_path / "kb.toml", intents)
    claimed = {c.example: c.other for c in claimed_examples(Dialogue(text_encoder, load_knowledge(kb), settings))}
    for name, examples in intents.items():
        for example in examples:
            without = knowledge_file(
                tmp_path / "without.toml", {**intents, name: tuple(e for e in examples if e != example)}
            )
            likeliest = Dialogue(text_encoder, load_knowledge(without), settings).rank(example)[0][0]
            assert claimed.get(example, name) == likeliest, example
    assert lift not in claimed  # its nearest example is directions', but two of its own agree


def test_questions_that_go_wrong_are_listed_and_fail_the_check(tmp_path):
    questions = tmp_path / "questions.toml"
    questions.write_text(
        'questions = [["restrooms", "Where is the toilet, please?"], ["tickets", "Where is the toilet?"],\n'
        '             ["none", "What is the boiling point of tungsten?"]]\n'
    )
    result = run_cli("kb", "check", "--questions", str(questions), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["questions"]["questions"] == 3 and report["questions"]["right"] == 2
    assert [(m["question"], m["outcome"], m["intent"]) for m in report["missed"]] == [
        ("Where is the toilet?", "wrong", "restrooms")
    ]


def test_a_questions_file_with_an_unknown_intent_is_refused_by_name(tmp_path):
    questions = tmp_path / "questions.toml"
    questions.write_text('questions = [["toilets", "Where is the loo?"]]\n')
    result = run_cli("kb", "check", "--questions", str(questions))
    assert result.returncode == 2
    assert "entry 1: unknown intent 'toilets'" in result.stderr and "restrooms" in result.stderr


def test_bench_intents_scores_every_question_of_the_split():
    result = run_cli("bench", "intents", "--split", "tuning", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = report["questions"]
    assert report["answerable"]["questions"] + report["not_answerable"]["questions"] == len(rows) >= 40
    outcomes = ("right", "asked back right", "rephrase", "asked back wrong", "wrong")
    assert sum(report["answerable"][o] for o in outcomes) == report["answerable"]["questions"]
    for row in rows:  # each outcome follows from the decision and the expected intent
        if row["kind"] == "answer":
            assert row["outcome"] == ("right" if row["intent"] == row["expected"] else "wrong")
        if row["kind"] == "ask_back":
            assert row["score"] < report["confident_threshold"]
    assert report["answerable"]["right_or_asked"] > 0.5
