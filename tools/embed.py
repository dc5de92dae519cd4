"""The `embed` toolset: sentence embeddings from the worker (POST /v1/embeddings), as raw
vectors for MCP clients that store them, and as similarity scores a model can read."""
from __future__ import annotations

import numpy as np

from tools.context import ToolContext
from tools.registry import Registry


def _vectors(ctx: ToolContext, texts: list[str]) -> tuple[str, np.ndarray]:
    result = ctx.worker("POST", "/v1/embeddings", json={"input": texts})
    data = sorted(result["data"], key=lambda d: d["index"])
    return result["model"], np.array([d["embedding"] for d in data], dtype=np.float32)


def register(registry: Registry) -> None:
    @registry.tool(toolset="embed")
    def embed(ctx: ToolContext, texts: list[str]) -> dict:
        """Turn texts into embedding vectors (unit length) with the local sentence-embedding model.

        Args:
            texts: the texts to embed
        """
        model, vectors = _vectors(ctx, texts)
        return {"model": model, "dim": int(vectors.shape[1]),
                "embeddings": [[round(float(x), 6) for x in v] for v in vectors]}

    @registry.tool(toolset="embed")
    def similarity(ctx: ToolContext, text: str, candidates: list[str]) -> dict:
        """Score how close in meaning each candidate is to a text (cosine similarity, -1 to 1),
        most similar first.

        Args:
            text: the text to compare against
            candidates: the texts to score
        """
        model, vectors = _vectors(ctx, [text, *candidates])
        scores = vectors[1:] @ vectors[0]
        order = np.argsort(-scores, kind="stable")
        return {"model": model, "results": [{"index": int(i), "text": candidates[i], "score": round(float(scores[i]), 4)}
                                            for i in order]}
