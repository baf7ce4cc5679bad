"""Each model wrapper assembled from the model store, with its runner(s).

`engines` is an EngineManager (TensorRT with CPU fallback) or None (ONNX Runtime on the CPU)."""

from __future__ import annotations

from engines.backends import open_runner
from engines.model_specs import MODELS
from engines.store.model_store import ModelStore

from device.models.asr import SpeechRecognizer
from device.models.end_of_turn import EndOfTurnDetector
from device.models.face_mesh import FaceMesh
from device.models.faces import FaceDetector
from device.models.text_encoder import TextEncoder
from device.models.tts import VOICE_GAIN, SpeechSynthesizer
from device.models.vad import VoiceActivityDetector


def load_vad(store: ModelStore, threads: int = 1, engines=None) -> VoiceActivityDetector:
    return VoiceActivityDetector(open_runner(store, "vad", threads, engines))


def load_asr(store: ModelStore, threads: int = 1, engines=None) -> SpeechRecognizer:
    return SpeechRecognizer(
        open_runner(store, "asr-encoder", threads, engines),
        open_runner(store, "asr-decoder", threads, engines),
        store.path(_extra("asr-decoder")),
    )


def load_tts(
    store: ModelStore,
    threads: int = 1,
    variability: float = 1.0,
    length_scale: float = 1.0,
    engines=None,
    gain: float = VOICE_GAIN,
    in_pieces: bool = True,
) -> SpeechSynthesizer:
    return SpeechSynthesizer(
        open_runner(store, "tts", threads, engines),
        open_runner(store, "tts-vocoder", threads, engines),
        store.path(_extra("tts")),
        length_scale=length_scale,
        variability=variability,
        gain=gain,
        in_pieces=in_pieces,
    )


def load_end_of_turn(store: ModelStore, threads: int = 1, threshold: float = 0.5, engines=None) -> EndOfTurnDetector:
    detector = EndOfTurnDetector(open_runner(store, "end-of-turn", threads, engines), threshold)
    detector.warm_up()
    return detector


def load_faces(store: ModelStore, threads: int = 1, engines=None) -> FaceDetector:
    return FaceDetector(open_runner(store, "face", threads, engines))


def load_face_mesh(store: ModelStore, threads: int = 1) -> FaceMesh:
    return FaceMesh(open_runner(store, "face-mesh", threads), open_runner(store, "iris", threads))


def load_text(store: ModelStore, threads: int = 1, engines=None) -> TextEncoder:
    return TextEncoder(open_runner(store, "text", threads, engines), store.path(_extra("text")))


def _extra(name: str) -> str:
    """The one other store file a model's wrapper reads (its tokenizer or voice settings)."""
    (extra,) = MODELS[name].extra_files
    return extra
