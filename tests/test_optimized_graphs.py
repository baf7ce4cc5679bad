"""ONNX Runtime's optimized graphs kept in the model store: made on a model's first load and loaded by
the next with the same outputs; one that does not load, or whose bytes changed, is made again, and where
none can be kept the model still loads."""

from __future__ import annotations

import hashlib
import logging

import onnx
from onnx import numpy_helper

from engines.backends import OPTIMIZED_DIR, open_runner
from engines.model_specs import MODELS
from engines.onnxrt_runner import ALLOW_SPINNING, OnnxRuntimeRunner, optimized_name

from device.models.asr import SpeechRecognizer

NAME = (
    "asr-decoder"  # the model whose optimizing takes longest: it loads in 1.9-2.2 s, 0.35 s unoptimized, on two cores
)


def _load(store, asr, beckett, optimized=None) -> tuple:
    """Where the decoder's session came from, and the tokens it decodes from a real recording."""
    with OnnxRuntimeRunner(NAME, store.path(MODELS[NAME].model), threads=2, optimized=optimized) as decoder:
        recognizer = SpeechRecognizer(asr.encoder, decoder, store.path("asr-tokenizer.bin"))
        return decoder.loaded_from, recognizer.transcribe(beckett[: 5 * 16000]).tokens


def _kept(store, directory):
    model = MODELS[NAME].model
    return directory / optimized_name(store.path(model), store.entries()[model].sha256)


def test_the_first_load_keeps_the_optimized_graph_and_the_next_load_uses_it(store, asr, beckett, tmp_path):
    kept = _kept(store, tmp_path)
    older = (
        tmp_path / f"{NAME}@0123456789abcdef-ort1.16.0-x86_64-00000000.onnx"
    )  # the model's, by an older ONNX Runtime
    another = tmp_path / f"{NAME}-other@0123456789abcdef-ort1.16.0-x86_64-00000000.onnx"  # another model's
    for path in (older, another):
        path.write_bytes(b"kept before")
    model = store.path(MODELS[NAME].model)
    plain_from, plain = _load(store, asr, beckett)
    first_from, first = _load(store, asr, beckett, kept)
    second_from, second = _load(store, asr, beckett, kept)
    assert (plain_from, first_from, second_from) == (model, model, kept)
    kept_files = [kept.name, kept.name + ".sha256", another.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept_files)  # no partial file left
    assert len(plain) > 5 and first == second == plain


def test_an_optimized_graph_that_does_not_load_is_made_again(store, asr, beckett, tmp_path, caplog):
    kept = _kept(store, tmp_path)
    kept.write_bytes(b"\x08\x07 cut short by a power loss")
    kept.with_name(kept.name + ".sha256").write_text(hashlib.sha256(kept.read_bytes()).hexdigest())
    loaded_from, _ = _load(store, asr, beckett, kept)
    assert loaded_from == store.path(MODELS[NAME].model)
    assert f"the optimized graph {kept} does not load" in caplog.text
    assert _load(store, asr, beckett, kept)[0] == kept


def test_an_optimized_graph_changed_on_disk_is_made_again(store, asr, beckett, tmp_path, caplog):
    """Its weights altered (a bit flip, or a hand): it would load and answer otherwise, unseen. Its bytes no
    longer match the sha256 it was kept with, so it is made again from the verified model."""
    kept = _kept(store, tmp_path)
    plain = _load(store, asr, beckett)[1]
    assert _load(store, asr, beckett, kept)[0] != kept  # made and kept
    graph = onnx.load(kept)
    weights = max(graph.graph.initializer, key=lambda t: t.ByteSize())
    weights.CopyFrom(numpy_helper.from_array(-numpy_helper.to_array(weights), weights.name))
    onnx.save(graph, kept)
    loaded_from, tokens = _load(store, asr, beckett, kept)
    assert loaded_from == store.path(MODELS[NAME].model) and tokens == plain
    assert "is not the one kept" in caplog.text
    assert _load(store, asr, beckett, kept)[0] == kept


def test_where_no_optimized_graph_can_be_kept_the_model_loads_all_the_same(store, asr, beckett, tmp_path, caplog):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    caplog.set_level(logging.INFO)
    loaded_from, tokens = _load(store, asr, beckett, blocked / "graphs" / "decoder.onnx")
    assert loaded_from == store.path(MODELS[NAME].model) and tokens
    assert "is optimized on every load" in caplog.text and blocked.read_text() == "not a directory"


def test_the_runners_of_the_product_keep_theirs_in_the_model_store(store):
    with open_runner(store, "vad") as runner:
        assert runner.optimized.parent == store.root / OPTIMIZED_DIR and runner.optimized.is_file()


def test_no_session_keeps_its_threads_spinning_between_runs(store, tmp_path):
    """The robot's sessions share few cores: a pool spinning after its run takes them from the others
    (engines/onnxrt_runner.py), whether the session came from the model, was optimized and kept, or
    was loaded from what was kept."""
    model = store.path(MODELS["vad"].model)
    kept = tmp_path / optimized_name(model, store.entries()[MODELS["vad"].model].sha256)
    spinning = []
    for optimized in (None, kept, kept):
        with OnnxRuntimeRunner("vad", model, threads=2, optimized=optimized) as runner:
            spinning.append(
                (runner.loaded_from, runner._session.get_session_options().get_session_config_entry(ALLOW_SPINNING))
            )
    assert spinning == [(model, "0"), (model, "0"), (kept, "0")]
