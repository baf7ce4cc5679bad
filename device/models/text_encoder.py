"""all-MiniLM-L6-v2 sentence embeddings: the dialogue ranks intents by cosine similarity."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

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

    def embed(self, texts: Sequence[str], between: Callable[[], None] = lambda: None) -> np.ndarray:
        """Unit-length embeddings, one row per text, in batches the engine's profile allows. `between` is
        called before each batch: a long run (a large knowledge base) reports progress, or is stopped by
        an exception it raises."""
        if not texts:
            return np.zeros((0, 384), np.float32)
        texts = list(texts)
        batches = []
        for i in range(0, len(texts), TEXT_BATCH):
            between()
            batches.append(self._embed(texts[i : i + TEXT_BATCH]))
        return np.concatenate(batches)

    def _embed(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], np.int64)
        mask = np.array([e.attention_mask for e in encoded], np.int64)
        return self.runner.infer({"input_ids": ids, "attention_mask": mask})["sentence_embedding"]
