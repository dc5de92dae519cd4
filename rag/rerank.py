"""Rerankers: score(query, documents) -> one relevance score per document, higher better.

- "embedding": 0.7 * cosine(query, doc) + 0.3 * BM25 / max BM25 over the given documents;
  no extra model beyond the embedder, but it embeds the documents again on every call.
  The /v1/rerank default. RAG search no longer uses it by default: on the six-manual eval
  (benchmarks/results/rag_eval.json) it lowered recall@1 and cost seconds a query on a
  busy CPU; search's own "prf" (rag/index.py) reuses the stored vectors instead.
- "cross-encoder": any local Hugging Face cross-encoder folder, through
  sentence_transformers.CrossEncoder; score = sigmoid of its logit (P(relevant) for
  two-label models). No trained cross-encoder ships on PyPI: it is for a user's own model.
- "llm": P(yes) that the samevm runtime's chat model gives, read from the logprobs of the
  first generated token of an OpenAI /v1/chat/completions call (rag/rerank_llm.py). On
  8 questions with the default 0.5B chat model it scored MRR 0.43 against 1.00 for
  embedding, at about 100 s a query on the CPU; on the H100 over the eval's 117 questions it
  took MRR@10 from 0.89 (the default search) to 0.39 reranking the top 10
  (`benchmarks/results/rag_eval_llmrerank.json`), so search never uses it by default.
`Rerankers` holds the configured ones by name.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rag.bm25 import scores_for
from rag.embedding import Embedder
from rag.errors import InputError
from rag.lazy import Lazy
from rag.rerank_llm import LlmReranker

BACKENDS = ("embedding", "cross-encoder", "llm")   # rag.index handles "prf" itself


class EmbeddingReranker:
    name = "embedding"

    def __init__(self, embedder: Embedder, cosine_weight: float = 0.7):
        self.embedder, self.cosine_weight = embedder, cosine_weight

    def score(self, query: str, documents: list[str]) -> list[float]:
        vectors = self.embedder.embed([query, *documents])
        cosine = vectors[1:] @ vectors[0]
        bm = scores_for(query, documents)
        bm = bm / bm.max() if bm.size and bm.max() > 0 else np.zeros(len(documents))
        w = self.cosine_weight
        return [float(x) for x in w * cosine + (1 - w) * bm]


class CrossEncoderReranker:
    name = "cross-encoder"

    def __init__(self, path: Path, max_length: int = 512, batch_size: int = 16):
        self.path, self.max_length, self.batch_size = Path(path), max_length, batch_size
        self.model = Lazy(self.path.name, "rerank", self._load)

    def _load(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder
        return CrossEncoder(str(self.path), device="cpu", max_length=self.max_length,
                            local_files_only=True)

    def score(self, query: str, documents: list[str]) -> list[float]:
        import torch
        model = self.model.get()
        logits = model.predict([(query, d) for d in documents], batch_size=self.batch_size,
                               activation_fn=torch.nn.Identity(), convert_to_numpy=True,
                               show_progress_bar=False)
        logits = np.asarray(logits, np.float64)
        if logits.ndim == 2:   # two or more labels: the last is "relevant"
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            return [float(x) for x in e[:, -1] / e.sum(axis=1)]
        return [float(x) for x in 1.0 / (1.0 + np.exp(-logits))]



class Rerankers:
    """The configured backends by name; InputError for an unknown or unconfigured one."""

    def __init__(self, embedder: Embedder, cross_encoder_path: Path | None = None,
                 llm: "LlmReranker | None" = None):
        self.backends: dict[str, object] = {"embedding": EmbeddingReranker(embedder)}
        if cross_encoder_path:
            self.backends["cross-encoder"] = CrossEncoderReranker(cross_encoder_path)
        if llm:
            self.backends["llm"] = llm

    def get(self, name: str):
        if name in self.backends:
            return self.backends[name]
        if name == "cross-encoder":
            raise InputError("no cross-encoder is configured: point the worker's cross_encoder_path "
                             "at a local Hugging Face cross-encoder folder")
        if name == "llm":
            raise InputError("the llm reranker is not configured: it needs the runtime's URL and model")
        raise InputError(f"unknown reranker {name!r}; known: prf (search only), {', '.join(BACKENDS)}")
