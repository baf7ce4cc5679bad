"""The dialogue on typed questions: knowledge base, built-ins, rephrasing, LLM on loopback, reload."""

import datetime
import http.server
import json
import threading
import time

import pytest

from device.conversation.dialogue import REPHRASE_ANSWER, Dialogue, DialogueSettings
from device.conversation.knowledge import KnowledgeError, load_knowledge
from device.conversation.llm import LlmClient, LlmSettings
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


class _FakeLlm(http.server.BaseHTTPRequestHandler):
    """A local OpenAI-compatible server whose behaviour the test picks."""

    mode = "ok"

    def do_POST(self):  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.mode == "redirect":  # to another address: must not be followed
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.2:9/v1/chat/completions")
            self.end_headers()
            return
        if self.mode == "drip":  # a byte every 0.2 s: each read is quick, the whole reply is not
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                for byte in b'{"choices": [{"message": {"content": "slowly"}}]}':
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if self.mode == "hang":
            time.sleep(3)
        body = (b"<html>oops</html>" if self.mode == "garbage" else json.dumps(
            {"choices": [{"message": {"content": f"The LLM says hi to: {request['messages'][-1]['content']}"}}]}).encode())
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        except BrokenPipeError:  # the client gave up waiting, as it should
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def llm_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeLlm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.mark.parametrize("mode", ["ok", "hang", "garbage", "drip", "redirect"])
def test_llm_answers_or_the_knowledge_base_does_within_the_timeout(text_encoder, llm_server, mode):
    _FakeLlm.mode = mode
    settings = LlmSettings(url=f"http://127.0.0.1:{llm_server.server_port}/v1", model="m", timeout_s=0.5,
                           system_prompt="be brief", max_words=40)
    dialogue = Dialogue(text_encoder, load_knowledge(), DialogueSettings(knowledge="", threshold=0.35), LlmClient(settings))
    started = time.monotonic()
    answer = dialogue.answer("Where is the toilet?")
    elapsed = time.monotonic() - started
    if mode == "ok":
        assert answer.source == "llm" and answer.text == "The LLM says hi to: Where is the toilet?"
    else:
        assert answer.source == "knowledge" and answer.intent == "restrooms"
        assert elapsed < settings.timeout_s + 1.0


def test_ask_cli_json():
    result = run_cli("ask", "Is there somewhere to eat?", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["intent"] == "food" and report["answer"].startswith("The cafe")
    assert report["ranking"][0] == {"intent": "food", "score": report["score"]}


def test_llm_ignores_the_proxy_of_the_environment(text_encoder, llm_server, monkeypatch):
    """Only the configured address is contacted: an http_proxy in the environment is not used."""
    _FakeLlm.mode = "ok"
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    settings = LlmSettings(url=f"http://127.0.0.1:{llm_server.server_port}/v1", model="m", timeout_s=1.0,
                           system_prompt="be brief", max_words=40)
    assert LlmClient(settings).answer("Hello?") == "The LLM says hi to: Hello?"
