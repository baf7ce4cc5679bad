"""all-MiniLM-L6-v2 sentence embeddings: the dialogue ranks intents by cosine similarity."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from engines.model_specs import TEXT_BATCH, TEXT_TOKENS
from engines.runner import Runner


class TextEncoder:
    def __init__(self, runner: Runner, tokenizer_path: Path) -> None:
        from tokenizers import Tokenizer

        self.runner = runner
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(TEXT_TOKENS)  # the model's own max_seq_length too
        self.tokenizer.enable_padding()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, one row per text, in batches the engine's profile allows."""
        if not texts:
            return np.zeros((0, 384), np.float32)
        texts = list(texts)
        return np.concatenate([self._embed(texts[i:i + TEXT_BATCH]) for i in range(0, len(texts), TEXT_BATCH)])

    def _embed(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], np.int64)
        mask = np.array([e.attention_mask for e in encoded], np.int64)
        return self.runner.infer({"input_ids": ids, "attention_mask": mask})["sentence_embedding"]
