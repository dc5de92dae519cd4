"""The `rag` toolset: store text or local files in the worker's retrieval index and search it
(POST /v1/rag/ingest, /v1/rag/search, GET /v1/rag/documents). Hits carry source and page so
an answer can cite them. A text and files are two tools: given one tool with both as optional
parameters, small models filled in both, with made-up paths. Collection names are the model's; the context's namespace maps them
to the worker's."""
from __future__ import annotations

from tools.context import ToolContext, ToolError
from tools.registry import Registry

SNIPPET_CHARS = 600    # text of one hit shown to the model


def _ingest(ctx: ToolContext, body: dict) -> dict:
    result = ctx.worker("POST", "/v1/rag/ingest", json=body)
    return {"collection": ctx.unscoped(result["collection"]), "documents": [
        {k: d.get(k) for k in ("source", "doc_id", "status", "chunks", "pages") if k in d}
        for d in result["documents"]]}


def register(registry: Registry) -> None:
    @registry.tool(toolset="rag")
    def rag_ingest(ctx: ToolContext, text: str, source: str) -> dict:
        """File a passage of background text (notes, an article, documentation) in the knowledge
        base, to be found later by topic with rag_search. Exact facts and records belong in a
        SQLite table instead. Storing the same text again changes nothing; a new text under the
        same source replaces it.

        Args:
            text: the text to store, word for word
            source: a short name for the text, to cite it by
        """
        return _ingest(ctx, {"collection": ctx.scoped("default"), "texts": [{"text": text, "source": source}]})

    @registry.tool(toolset="rag")
    def rag_ingest_files(ctx: ToolContext, paths: list[str], collection: str = "default") -> dict:
        """Store local files (PDF, text, markdown) or folders in the knowledge base, page by page.

        Args:
            paths: file or folder paths on this machine
            collection: the index to store into
        """
        if not paths:
            raise ToolError("give at least one path")
        return _ingest(ctx, {"collection": ctx.scoped(collection), "paths": paths})

    @registry.tool(toolset="rag")
    def rag_search(ctx: ToolContext, query: str, collection: str = "default", k: int = 4) -> dict:
        """Search the knowledge base for background passages about a question; each hit gives
        its text, source and page.

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
                                        "store text with rag_ingest or files with rag_ingest_files"}
        return {"hits": [{"source": h["source"], "page": h.get("page"),
                          **({"section": h["section"]} if h.get("section") else {}),   # the PDF's heading path
                          "text": h["text"][:SNIPPET_CHARS], "score": round(h["score"], 4)} for h in result["results"]]}

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
