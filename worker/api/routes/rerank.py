"""POST /v1/rerank in the Cohere/Jina shape: query + documents -> results by relevance."""
from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from worker.deps import RerankersDep, SettingsDep

router = APIRouter()


class TextDocument(BaseModel):
    text: str = Field(max_length=100_000)


class RerankRequest(BaseModel):
    query: str = Field(min_length=1, max_length=10_000)
    documents: list[str | TextDocument] = Field(min_length=1, max_length=1000)
    model: str | None = Field(None, description="backend: embedding | cross-encoder | llm; "
                                                "default: the worker's setting")
    top_n: int | None = Field(None, ge=1, le=1000)
    return_documents: bool = False


@router.post("/rerank")
async def rerank(req: RerankRequest, rerankers: RerankersDep, settings: SettingsDep) -> dict:
    """Score each document against the query; results best first, with their input index."""
    backend = rerankers.get(req.model or settings.default_rerank)
    texts = [d if isinstance(d, str) else d.text for d in req.documents]
    scores = await run_in_threadpool(backend.score, req.query, texts)
    order = sorted(range(len(texts)), key=lambda i: -scores[i])[:req.top_n or len(texts)]
    return {"model": backend.name,
            "results": [{"index": i, "relevance_score": scores[i],
                         **({"document": {"text": texts[i]}} if req.return_documents else {})} for i in order]}
