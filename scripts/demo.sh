#!/usr/bin/env bash
# The product's main job on its embedded default. Until the conversation pipeline lands, this
# runs each model once on real inputs and writes what it made to out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin/orin-avatar
mkdir -p out
store=$(.venv/bin/python -c 'from engines.store.model_store import ModelStore; print(ModelStore().root)')
echo "== speech recognition: $store/samples/beckett.wav"
$bin transcribe "$store/samples/beckett.wav"
echo "== speech synthesis -> out/hello.wav"
$bin speak "Hello! Welcome to the visitor centre. How can I help you today?" --out out/hello.wav
echo "== round trip: out/hello.wav -> text"
$bin transcribe out/hello.wav
echo "== face detection: device/samples/astronaut.jpg"
$bin detect-faces device/samples/astronaut.jpg
