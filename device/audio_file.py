"""Reading and writing audio files, and resampling to the rate a model wants.

soundfile (libsndfile) reads WAV/FLAC/OGG of any sample format; soxr resamples (the same
resampler serves the microphone stream later).
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np

from engines.errors import InputError
from engines.files import write_atomic
from engines.model_specs import SPEECH_RATE


def read_audio(path: Path, rate: int = SPEECH_RATE) -> np.ndarray:
    """Mono float32 in [-1, 1] at `rate`, whatever the file's rate, channels or sample format."""
    return read_channels(path, rate).mean(axis=0)


def read_channels(path: Path, rate: int = SPEECH_RATE) -> np.ndarray:
    """Float32 in [-1, 1] at `rate`, one row per channel (a microphone array's recording)."""
    import soundfile

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such audio file")
    try:
        data, file_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise InputError(f"{path} is not a readable audio file ({exc}); give a WAV or FLAC recording") from exc
    if data.shape[0] == 0:
        raise InputError(f"{path} contains no audio samples")
    declared = _wav_frames_declared(path)
    if declared is not None and data.shape[0] < declared:
        raise InputError(f"{path} is truncated: its header promises {declared} samples, it holds {data.shape[0]}")
    if not np.isfinite(data).all():
        raise InputError(f"{path} contains samples that are not numbers (NaN or infinite); re-export the recording")
    return np.stack([resample(channel, file_rate, rate) for channel in data.T])


def _wav_frames_declared(path: Path) -> int | None:
    """The frame count a WAV file's header promises (libsndfile quietly reads what is there)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    position, block_align = 12, None
    while position + 8 <= len(head):
        kind, size = head[position : position + 4], struct.unpack("<I", head[position + 4 : position + 8])[0]
        if kind == b"fmt ":
            block_align = struct.unpack("<H", head[position + 20 : position + 22])[0]
        elif kind == b"data":
            return size // block_align if block_align else None
        position += 8 + size + (size & 1)
    return None


def resample(audio: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    import soxr

    audio = np.asarray(audio, dtype=np.float32)
    if from_rate == to_rate:
        return audio
    return soxr.resample(audio, from_rate, to_rate).astype(np.float32)


def write_wav(path: Path, audio: np.ndarray, rate: int) -> None:
    """16-bit PCM mono WAV, the format every player and `aplay` take; written whole or not at all, and
    never through a symlink planted at `path`."""
    import soundfile

    wav = io.BytesIO()
    soundfile.write(wav, np.clip(audio, -1.0, 1.0), rate, subtype="PCM_16", format="WAV")
    write_atomic(Path(path), wav.getvalue())
