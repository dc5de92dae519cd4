"""The `rag` toolset: store text or local files in the worker's retrieval index and search it
(POST /v1/rag/ingest, /v1/rag/search, GET /v1/rag/documents). Hits carry source and page so
an answer can cite them. Collection names are the model's; the context's namespace maps them
to the worker's."""
from __future__ import annotations

from tools.context import ToolContext, ToolError
from tools.registry import Registry

SNIPPET_CHARS = 600    # text of one hit shown to the model


def register(registry: Registry) -> None:
    @registry.tool(toolset="rag")
    def rag_ingest(ctx: ToolContext, text: str | None = None, source: str | None = None,
                   paths: list[str] | None = None, collection: str = "default") -> dict:
        """Store background knowledge for later retrieval: a text under a source name, or
        files (PDF, text, markdown) by path. Storing the same content again changes nothing.

        Args:
            text: the text to store
            source: a short name for the text, used to cite and replace it
            paths: local file or folder paths to store instead of text
            collection: the index to store into
        """
        if text is None and not paths:
            raise ToolError("give `text` (with a `source` name) or `paths`")
        if text is not None and not source:
            raise ToolError("a text needs a `source` name to cite it by")
        body = {"collection": ctx.scoped(collection), "texts": [{"text": text, "source": source}] if text is not None else [],
                "paths": paths or []}
        result = ctx.worker("POST", "/v1/rag/ingest", json=body)
        return {"collection": ctx.unscoped(result["collection"]), "documents": [
            {k: d.get(k) for k in ("source", "doc_id", "status", "chunks", "pages") if k in d}
            for d in result["documents"]]}

    @registry.tool(toolset="rag")
    def rag_search(ctx: ToolContext, query: str, collection: str = "default", k: int = 4) -> dict:
        """Search the stored knowledge for passages about a question; each hit gives its
        text, source and page.

        Args:
            query: what to look for, in words
            collection: the index to search
            k: how many passages to return
        """
        try:
            result = ctx.worker("POST", "/v1/rag/search", json={"query": query, "collection": ctx.scoped(collection),
                                                                 "k": max(1, min(k, 20))})
        except ToolError as e:
            if e.status != 404:
                raise
            # Nothing stored there yet: for an agent that is an empty search, not a failure
            # (told "unknown collection", a small model retries the search instead of storing).
            return {"hits": [], "note": f"nothing is stored in the collection {collection!r} yet; "
                                        "store text there with rag_ingest"}
        return {"hits": [{"source": h["source"], "page": h.get("page"), "text": h["text"][:SNIPPET_CHARS],
                          "score": round(h["score"], 4)} for h in result["results"]]}

    @registry.tool(toolset="rag")
    def rag_documents(ctx: ToolContext, collection: str = "default") -> dict:
        """List the documents stored in a collection, with their chunk and page counts.

        Args:
            collection: the index to list
        """
        try:
            docs = ctx.worker("GET", "/v1/rag/documents", params={"collection": ctx.scoped(collection)})["documents"]
        except ToolError as e:
            if e.status != 404:
                raise
            # As for a search: nothing stored yet (and the worker's list of the collections
            # that do exist would name other namespaces').
            docs = []
        return {"collection": collection, "documents": [
            {k: d.get(k) for k in ("source", "doc_id", "kind", "chunks", "pages")} for d in docs]}
