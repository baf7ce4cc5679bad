"""Regenerate the bundled visitor questions (device/samples/visit/) with the product's own voice.

Run: .venv/bin/python scripts/make_visit.py . A "|" in a question adds a 120 ms pause mid-sentence
(about 300 ms of silence with the voice's own),
shorter than the endpoint hangover, so the question must still come through as one utterance.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.store.model_store import ModelStore  # noqa: E402

from device.audio_file import resample, write_wav  # noqa: E402
from device.models import catalog  # noqa: E402

QUESTIONS = [
    ("01-hello", "Hello!", "greeting"),
    ("02-opening", "What time do you open tomorrow?", "opening_hours"),
    ("03-restrooms", "Excuse me, where are the | restrooms?", "restrooms"),
    ("04-tickets", "How much is a ticket for a student?", "tickets"),
    ("05-wifi", "Do you have free Wi-Fi here?", "wifi"),
    ("06-goodbye", "Thank you, goodbye!", "goodbye"),
]
OUT = Path(__file__).resolve().parent.parent / "device" / "samples" / "visit"
LEAD, PAUSE = 0.3, 0.12


def main() -> None:
    tts = catalog.load_tts(ModelStore(), variability=0.0, length_scale=1.1)
    lines = ["# The bundled visit: each question's file, its words and the intent it should get.", ""]
    for name, text, intent in QUESTIONS:
        parts = []
        for i, part in enumerate(text.split("|")):
            if i:
                parts.append(np.zeros(int(PAUSE * 16000), np.float32))
            audio = np.concatenate([c.audio for c in tts.synthesize(part.strip())])
            parts.append(resample(audio, tts.sample_rate, 16000) * 0.5)
        audio = np.concatenate([np.zeros(int(LEAD * 16000), np.float32), *parts])
        write_wav(OUT / f"{name}.wav", audio, 16000)
        lines += [
            "[[question]]",
            f'file = "{name}.wav"',
            f'text = "{text.replace(" | ", " ")}"',
            f'intent = "{intent}"',
            "",
        ]
    (OUT / "visit.toml").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
