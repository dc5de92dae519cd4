"""Sentence embeddings (sentence-transformers, offline from a local folder) and the chromadb
embedding function that uses them.

Any sentence-transformers folder works; the worker's catalog supplies the default,
all-MiniLM-L6-v2 (dim 384, 256 word pieces). The model loads on first `embed`; the tokenizer alone (tokenizer.json,
milliseconds to load) serves chunking and token counts. Vectors come back L2-normalised,
so a dot product is the cosine similarity.
"""
from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager, nullcontext
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from rag.lazy import Lazy

DEFAULT_EMBEDDING = "all-minilm-l6-v2"
FEW = 4                  # texts: a query, not a batch
_THREADS = threading.Lock()


@contextmanager
def _one_thread():
    """torch on one thread for a few short texts: splitting a 20-token query over cores costs
    more in handoffs than it saves, and on a busy CPU far more (measured 1.5 s against
    0.2 s a query under load 10 on 2 cores)."""
    import torch
    with _THREADS:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)

class Embedder:
    def __init__(self, model_dir: Path, name: str = DEFAULT_EMBEDDING, batch_size: int = 32):
        self.model_dir, self.name, self.batch_size = Path(model_dir), name, batch_size
        self.model = Lazy(name, "embedding", self._load)

    def _load(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")   # a local folder; never ask a hub
        from sentence_transformers import SentenceTransformer
        return SentenceTransformer(str(self.model_dir), device="cpu")

    @cached_property
    def _tokenizer(self):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tok.no_truncation()     # the file truncates at the model's length; chunking needs it all
        tok.no_padding()
        return tok

    @cached_property
    def max_tokens(self) -> int:
        """Word pieces the model reads per text, less the [CLS] and [SEP] it adds."""
        config = json.loads((self.model_dir / "sentence_bert_config.json").read_text())
        return int(config["max_seq_length"]) - 2

    @cached_property
    def dim(self) -> int:
        return int(json.loads((self.model_dir / "config.json").read_text())["hidden_size"])

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).offsets)

    def count_tokens(self, texts: list[str]) -> int:
        return sum(len(e.ids) for e in self._tokenizer.encode_batch(texts))

    def embed(self, texts: list[str]) -> np.ndarray:
        """[n, dim] float32, unit length."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        model = self.model.get()
        with _one_thread() if len(texts) <= FEW else nullcontext():
            vectors = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        return vectors.astype(np.float32)


class ChromaEmbedding(EmbeddingFunction[Documents]):
    """chromadb's embedding-function protocol over an Embedder, in cosine space."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def __call__(self, input: Documents) -> Embeddings:
        return list(self.embedder.embed(list(input)))

    @staticmethod
    def name() -> str:
        return "samevm-sentence-transformers"

    def get_config(self) -> dict[str, Any]:
        return {"model": self.embedder.name, "model_dir": str(self.embedder.model_dir)}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "ChromaEmbedding":
        return ChromaEmbedding(Embedder(Path(config["model_dir"]), config["model"]))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]
