"""The perception stage and who hears of it: camera -> faces -> engagement, then the avatar (who is
there, where to look), the visit's greeting (arrivals and departures) and the microphone's beam
(toward the engaged face). Its callbacks run on the perception thread and only send messages: the
avatar's inbox, the conversation's threads, the beam's queue."""

from __future__ import annotations

import queue
from typing import Callable

from device.conversation.visitors import VisitorGreeting
from device.messages import LookAt, Presence
from device.models.faces import FaceDetector
from device.settings import CameraSettings
from device.vision.camera import Camera
from device.vision.engagement import Engagement, VisitorArrived, VisitorLeft
from device.vision.perception import Perception


class Audience:
    def __init__(
        self,
        settings: CameraSettings,
        greeting: VisitorGreeting,
        avatar_inbox: queue.Queue,
        steer: Callable[[float, float], None],
    ) -> None:
        self.settings = settings
        self.greeting = greeting
        self.avatar_inbox = avatar_inbox
        self.steer = steer

    def watch(self, camera: Camera, faces: FaceDetector, beat: Callable[[], None]) -> Perception:
        """The perception thread on `camera`, its events and gaze sent here."""
        rate = self.settings.detect_hz
        return Perception(
            camera, faces, Engagement(self.settings.engagement()), rate, self.on_event, self.on_gaze, beat
        )

    def on_event(self, event: object) -> None:
        if isinstance(event, VisitorArrived):
            self.avatar_inbox.put(Presence(True))
        self.greeting.on_event(event)
        if isinstance(event, VisitorLeft):
            self.avatar_inbox.put(Presence(False))

    def on_gaze(self, point: tuple[float, float] | None) -> None:
        self.avatar_inbox.put(LookAt(point))
        if point is not None:
            self.steer(*self.settings.direction_of(point))
