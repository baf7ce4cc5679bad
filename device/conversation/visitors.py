"""What the robot does when the camera sees a visitor arrive or leave: a new visit's memory, a greeting,
listening while someone is there (with `[camera] gate_listening`), a goodbye. Called on the perception
thread; every call it makes on the conversation is a message to the conversation's own threads."""

from __future__ import annotations

from device.conversation.turn_loop import Conversation
from device.vision.engagement import VisitorArrived, VisitorLeft


class VisitorGreeting:
    def __init__(self, conversation: Conversation, gate_listening: bool) -> None:
        self.conversation = conversation
        self.gate_listening = gate_listening
        conversation.set_listening(not gate_listening)

    def on_event(self, event: object) -> None:
        conversation, intents = self.conversation, self.conversation.dialogue.intents
        if isinstance(event, (VisitorArrived, VisitorLeft)):
            conversation.new_visit()  # nothing of a visit is kept after it
        if isinstance(event, VisitorArrived):
            conversation.set_listening(True)
            conversation.announce("greeting", intents["greeting"].answer)
        elif isinstance(event, VisitorLeft):
            conversation.announce("goodbye", intents["goodbye"].answer)
            conversation.set_listening(not self.gate_listening)
