"""The `rerank` toolset: order passages by relevance to a query with the worker's reranker
(POST /v1/rerank, the Cohere/Jina shape)."""
from __future__ import annotations

from tools.context import ToolContext
from tools.registry import Registry


def register(registry: Registry) -> None:
    @registry.tool(toolset="rerank")
    def rerank(ctx: ToolContext, query: str, documents: list[str], top_n: int | None = None) -> dict:
        """Order passages by how well each answers a query, best first, with relevance scores.

        Args:
            query: the question or need
            documents: the passages to order
            top_n: keep only this many of the best
        """
        body = {"query": query, "documents": documents, **({"top_n": top_n} if top_n else {})}
        result = ctx.worker("POST", "/v1/rerank", json=body)
        return {"model": result["model"], "results": [
            {"index": r["index"], "text": documents[r["index"]], "score": round(r["relevance_score"], 4)}
            for r in result["results"]]}
