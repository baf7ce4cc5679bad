"""The operator's knowledge base: the example loads; mistakes are named by file, line and key."""

import os

import pytest

from device.conversation.knowledge import KnowledgeError, load_knowledge


def test_embedded_example_has_the_visitor_centre_topics():
    names = {i.name for i in load_knowledge()}
    assert {"opening_hours", "restrooms", "tickets", "directions", "wifi", "lost_and_found", "who_are_you"} <= names


GOOD = '[[intent]]\nname = "a"\nexamples = ["x?"]\nanswer = "y."\n\n'


@pytest.mark.parametrize(
    "text, fragment",
    [
        (GOOD + '[[intent]]\nname = "b"\nexamples = ["q?"]\n', "line 6: intent 'b' has no 'answer'"),
        (GOOD + '[[intent]]\nname = "b"\nexamples = []\nanswer = "z"\n', "line 6: intent 'b' needs 'examples'"),
        (GOOD + '[[intent]]\nname = "a"\nexamples = ["q"]\nanswer = "z"\n', "line 6: intent name 'a' is used twice"),
        (GOOD + '[[intent]]\nname = "b"\nexample = ["q"]\nanswer = "z"\n', "line 6: unknown key(s) example"),
        (GOOD + '[[intent]]\nname = "has space"\nexamples = ["q"]\nanswer = "z"\n', "line 6: 'name'"),
        ('[[intent]]\nname = "a"\nexamples = ["x?"\nanswer = "y."\n', "line 4"),
        ("", "no [[intent]] tables"),
        (
            GOOD + '[[intent]]\nname = "b"\nexamples = ["q"]\nanswer = "z"\ntopic = 3\n',
            "line 6: intent 'b' has a 'topic' that is not a string",
        ),
    ],
)
def test_mistakes_name_file_line_and_key(tmp_path, text, fragment):
    path = tmp_path / "knowledge.toml"
    path.write_text(text)
    with pytest.raises(KnowledgeError) as error:
        load_knowledge(path)
    assert str(path) in str(error.value) and fragment in str(error.value)


def test_the_ask_back_names_the_topic_or_else_the_first_example(tmp_path):
    path = tmp_path / "knowledge.toml"
    path.write_text(
        GOOD + '[[intent]]\nname = "b"\nexamples = ["Where is the zoo?"]\nanswer = "z"\ntopic = "the zoo"\n'
    )
    first, second = load_knowledge(path)
    assert (first.ask_back, second.ask_back) == ("Did you ask: x?", "Did you mean the zoo?")


def test_missing_file(tmp_path):
    with pytest.raises(KnowledgeError, match="nope.toml does not exist"):
        load_knowledge(tmp_path / "nope.toml")


def test_not_utf8_or_not_a_regular_file_is_refused_with_the_reason(tmp_path):
    latin = tmp_path / "latin1.toml"
    latin.write_bytes('[[intent]]\nname = "cafe"\nexamples = ["Caf\xe9?"]\nanswer = "Upstairs."\n'.encode("latin-1"))
    with pytest.raises(KnowledgeError, match="is not UTF-8 text"):
        load_knowledge(latin)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # reading it would block the reloading thread forever
    with pytest.raises(KnowledgeError, match="is not a regular file"):
        load_knowledge(fifo)
    with pytest.raises(KnowledgeError, match="is not a regular file"):
        load_knowledge(tmp_path)


def test_headers_with_spaces_and_inline_tables_keep_every_intent(tmp_path):
    spaced = tmp_path / "spaced.toml"
    spaced.write_text(
        '[[ intent ]]\nname = "a"\nexamples = ["q"]\nanswer = "r"\n\n'
        '[[ intent ]]\nname = "b"\nexamples = ["q2"]\nanswer = "r2"\n'
    )
    assert [i.name for i in load_knowledge(spaced)] == ["a", "b"]
    inline = tmp_path / "inline.toml"
    inline.write_text('intent = [{name = "a", examples = ["q"], answer = "r"}, {name = "b", examples = ["q2"]}]\n')
    with pytest.raises(KnowledgeError, match="intent 2: intent 'b' has no 'answer'"):
        load_knowledge(inline)


def test_an_intent_named_like_a_built_in_is_refused(text_encoder, tmp_path):
    from device.conversation.dialogue import Dialogue
    from device.settings import load_settings

    path = tmp_path / "kb.toml"
    path.write_text('[[intent]]\nname = "time"\nexamples = ["When do you close?"]\nanswer = "At six."\n')
    with pytest.raises(KnowledgeError, match="time are built in"):
        Dialogue(text_encoder, load_knowledge(path), load_settings().dialogue)
