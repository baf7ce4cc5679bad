"""The avatar's styles: the drawn character or the operator's portrait, behind one `render(pose)`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import numpy as np

from engines.store.model_store import ModelStore

from device.avatar.portrait import PortraitRenderer, cached_landmarks, read_photo
from device.avatar.renderer import Colours, Pose, Renderer
from device.settings import AvatarSettings

log = logging.getLogger(__name__)


class Style(Protocol):
    width: int
    height: int

    def render(self, pose: Pose) -> np.ndarray: ...


def open_style(settings: AvatarSettings, store: ModelStore, threads: int = 1) -> Style:
    """The configured style at the configured size; the portrait's face is located once (cached)."""
    if settings.style == "portrait":
        path = Path(settings.portrait)
        photo = read_photo(path)
        if path.stat().st_mode & 0o077:
            log.warning(
                "portrait %s can be read by other users: faces are personal data; keep it in the state "
                "directory, owned by the service's user, mode 600",
                path,
            )
        return PortraitRenderer(photo, cached_landmarks(photo, store, threads), settings.width, settings.height)
    return Renderer(settings.width, settings.height, Colours.of(settings))
