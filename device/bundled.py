"""Material that ships with the software: the sample photo and the bundled visit."""

from pathlib import Path

SAMPLES = Path(__file__).parent / "samples"
SAMPLE_PHOTO = SAMPLES / "astronaut.jpg"  # NASA, public domain (scikit-image's "astronaut")
BUNDLED_VISIT = SAMPLES / "visit"
