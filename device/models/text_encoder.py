"""all-MiniLM-L6-v2 sentence embeddings: the dialogue ranks intents by cosine similarity."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from engines.runner import Runner

MAX_TOKENS = 256  # the sentence-transformers max_seq_length of this model


class TextEncoder:
    def __init__(self, runner: Runner, tokenizer_path: Path) -> None:
        from tokenizers import Tokenizer

        self.runner = runner
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, one row per text."""
        if not texts:
            return np.zeros((0, 384), np.float32)
        encoded = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], np.int64)
        mask = np.array([e.attention_mask for e in encoded], np.int64)
        return self.runner.infer({"input_ids": ids, "attention_mask": mask})["sentence_embedding"]
