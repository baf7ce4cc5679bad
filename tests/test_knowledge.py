"""The operator's knowledge base: the example loads; mistakes are named by file, line and key."""

import pytest

from device.conversation.knowledge import KnowledgeError, load_knowledge


def test_embedded_example_has_the_visitor_centre_topics():
    names = {i.name for i in load_knowledge()}
    assert {"opening_hours", "restrooms", "tickets", "directions", "wifi", "lost_and_found", "who_are_you"} <= names


GOOD = '[[intent]]\nname = "a"\nexamples = ["x?"]\nanswer = "y."\n\n'


@pytest.mark.parametrize("text, fragment", [
    (GOOD + '[[intent]]\nname = "b"\nexamples = ["q?"]\n', "line 6: intent 'b' has no 'answer'"),
    (GOOD + '[[intent]]\nname = "b"\nexamples = []\nanswer = "z"\n', "line 6: intent 'b' needs 'examples'"),
    (GOOD + '[[intent]]\nname = "a"\nexamples = ["q"]\nanswer = "z"\n', "line 6: intent name 'a' is used twice"),
    (GOOD + '[[intent]]\nname = "b"\nexample = ["q"]\nanswer = "z"\n', "line 6: unknown key(s) example"),
    (GOOD + '[[intent]]\nname = "has space"\nexamples = ["q"]\nanswer = "z"\n', "line 6: 'name'"),
    ('[[intent]]\nname = "a"\nexamples = ["x?"\nanswer = "y."\n', "line 4"),
    ("", "no [[intent]] tables"),
])
def test_mistakes_name_file_line_and_key(tmp_path, text, fragment):
    path = tmp_path / "knowledge.toml"
    path.write_text(text)
    with pytest.raises(KnowledgeError) as error:
        load_knowledge(path)
    assert str(path) in str(error.value) and fragment in str(error.value)


def test_missing_file(tmp_path):
    with pytest.raises(KnowledgeError, match="cannot read"):
        load_knowledge(tmp_path / "nope.toml")
