"""Mouth shapes for the visemes, and blending between them on the playback clock."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from device.messages import Viseme


@dataclass(frozen=True)
class Mouth:
    open: float  # 0 closed .. 1 wide open
    width: float  # 0.6 pursed .. 1.2 stretched
    round: float  # 0 flat .. 1 rounded lips
    teeth: float = 0.0  # upper teeth on the lower lip (F, V)


REST = Mouth(0.0, 1.0, 0.0)
SHAPES: dict[str, Mouth] = {
    "rest": REST,
    "AI": Mouth(0.85, 1.05, 0.1),
    "E": Mouth(0.45, 1.15, 0.0),
    "I": Mouth(0.3, 1.2, 0.0),
    "O": Mouth(0.65, 0.75, 0.8),
    "U": Mouth(0.35, 0.6, 1.0),
    "WQ": Mouth(0.2, 0.6, 0.9),
    "MBP": Mouth(0.0, 0.95, 0.0),
    "FV": Mouth(0.12, 1.0, 0.0, teeth=1.0),
    "TH": Mouth(0.2, 1.0, 0.0, teeth=0.6),
    "L": Mouth(0.35, 1.0, 0.1),
    "S": Mouth(0.15, 1.1, 0.0, teeth=0.4),
    "CONS": Mouth(0.25, 1.0, 0.1),
}
BLEND_S = 0.06  # each shape eases in over 60 ms, so the mouth moves rather than jumps
# Lips move ahead of the sound they make (coarticulation), and the ease-in and the animator's
# smoothing delay the shape: looking this far ahead centres the mouth on the sound (measured
# with `orin-avatar bench render`: +60 ms late without it).
LEAD_S = 0.06


def blend(a: Mouth, b: Mouth, weight: float) -> Mouth:
    w = float(np.clip(weight, 0.0, 1.0))
    return Mouth(
        *(x + (y - x) * w for x, y in zip((a.open, a.width, a.round, a.teeth), (b.open, b.width, b.round, b.teeth)))
    )


def mouth_at(visemes: tuple[Viseme, ...], sample: int, rate: int) -> Mouth:
    """The mouth `sample` samples into a reply: the current viseme, eased in from the one before."""
    sample += int(LEAD_S * rate)
    index = int(np.searchsorted([v.sample for v in visemes], sample, side="right")) - 1
    if index < 0:
        return REST
    current = SHAPES.get(visemes[index].shape, REST)
    previous = SHAPES.get(visemes[index - 1].shape, REST) if index > 0 else REST
    return blend(previous, current, (sample - visemes[index].sample) / (BLEND_S * rate))
