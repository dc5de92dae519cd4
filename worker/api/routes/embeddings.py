"""POST /v1/embeddings in OpenAI's shape (float lists, or base64 little-endian float32)."""
from __future__ import annotations

import base64
from typing import Annotated, Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from httpkit.errors import APIError
from worker.deps import EmbedderDep

router = APIRouter()

ALIASES = {"all-minilm-l6-v2", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
MAX_INPUTS = 2048


# The model reads 256 tokens of a text; the tokenizer would still read all of it, so a text is bounded.
Text = Annotated[str, Field(max_length=100_000)]


class EmbeddingRequest(BaseModel):
    input: Text | list[Text] = Field(description="a text or a list of texts (token arrays are not taken)")
    model: str = "all-minilm-l6-v2"
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1, le=65_536, description="must equal the model's dimension if given")
    user: str | None = None


@router.post("/embeddings")
async def embeddings(req: EmbeddingRequest, embedder: EmbedderDep) -> dict:
    """Embed texts with the worker's sentence-embedding model (vectors have unit length)."""
    if req.model not in ALIASES | {embedder.name}:
        raise APIError(404, f"unknown embedding model {req.model!r}; this worker serves {embedder.name!r}",
                       code="model_not_found")
    texts = [req.input] if isinstance(req.input, str) else req.input
    if not texts or len(texts) > MAX_INPUTS:
        raise APIError(400, f"give 1 to {MAX_INPUTS} input texts")
    if any(not t for t in texts):
        raise APIError(400, "an input text is empty")
    if req.dimensions is not None and req.dimensions != embedder.dim:
        raise APIError(400, f"{embedder.name} gives {embedder.dim} dimensions, not {req.dimensions}")
    vectors = await run_in_threadpool(embedder.embed, texts)
    tokens = embedder.count_tokens(texts)

    def encode(v):
        return base64.b64encode(v.astype("<f4").tobytes()).decode() if req.encoding_format == "base64" \
            else [float(x) for x in v]
    return {"object": "list", "model": embedder.name,
            "data": [{"object": "embedding", "index": i, "embedding": encode(v)} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
