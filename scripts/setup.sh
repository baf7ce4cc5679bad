#!/usr/bin/env bash
# One-shot, idempotent set-up on a fresh Debian/Ubuntu machine (a Jetson with JetPack 6, or a PC):
# apt packages, a virtual environment in .venv, the package, and the model store.
# Usage: scripts/setup.sh [--test]   (--test adds the test tools, the text-encoder reference and a local LLM server)
set -euo pipefail
cd "$(dirname "$0")/.."

with_test=0
[ "${1:-}" = "--test" ] && with_test=1

apt_packages=(python3-venv python3-dev build-essential pkg-config portaudio19-dev libsystemd-dev ffmpeg)
# The tests also need a virtual X server, a screenshot tool, systemd-analyze for the unit file, and a
# PulseAudio null sink (a sound card paced in real time, reached through ALSA's pulse plugin), and strace
# with a network namespace (iproute2) to record every connection the product tries.
[ "${1:-}" = "--test" ] && apt_packages+=(cmake xvfb x11-apps imagemagick systemd pulseaudio pulseaudio-utils libasound2-plugins strace iproute2)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing apt packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $(python3 --version)"
  # --system-site-packages lets JetPack's TensorRT (python3-libnvinfer) be seen on a Jetson.
  python3 -m venv --system-site-packages .venv
fi
pip=(.venv/bin/python -m pip -q --disable-pip-version-check)
stamp=.venv/.installed-$(cat setup.py pyproject.toml device/sound/webrtc_aec3.cc | sha256sum | cut -c1-16)-$with_test
if [ ! -f "$stamp" ]; then
  echo "==> installing orin-avatar into .venv"
  "${pip[@]}" install -U pip
  if [ $with_test = 1 ]; then
    # torch==2.13.0 (CPU) only for the sentence-transformers reference in the tests.
    "${pip[@]}" install "torch==2.13.0"
    # llm-server builds llama.cpp from source (several minutes on 2 cores), for any x86-64 CPU with
    # AVX2 rather than for this one (GGML_NATIVE=OFF): built natively on a Xeon with AMX, the server
    # of llama-cpp-python 0.3.36 crashed (SIGSEGV) on its first reply (llama.cpp's AMX matrix multiply,
    # ggml-org/llama.cpp issue 20824; dspy's CI dropped AMX for it, PR 10079). --no-cache-dir: a wheel built
    # natively before (pip's cache does not know CMAKE_ARGS) is not reused.
    CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
      "${pip[@]}" install --no-cache-dir -e ".[test,reference,plot,llm-server]"
  else
    "${pip[@]}" install -e .
  fi
  rm -f .venv/.installed-*
  touch "$stamp"
fi

echo "==> model store"
.venv/bin/orin-avatar models download
.venv/bin/orin-avatar models sync --wheelhouse "$(.venv/bin/python -c 'from engines.store.model_store import default_wheelhouse; print(default_wheelhouse())')"
