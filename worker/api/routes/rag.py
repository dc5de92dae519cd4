"""RAG: ingest (text, uploaded files, or allowed local paths), documents, collections, search.

POST /ingest takes JSON ({"texts": [...], "paths": [...]}) or a multipart form (files
plus a `collection` field). An upload's file name is its source, as given: a client that
sends the full path (as `samevm ingest` does) gets the identity a path ingest of that
file gets, and same-named files from different folders stay apart. All inputs are read
and checked first; only when every one is usable does indexing start (their chunks
embedded together), and each document is written all-or-nothing. Each document has a
budget (seconds, pages, chunks); when the client disconnects the work stops.
"""
from __future__ import annotations

import asyncio
from typing import Callable, Literal, TypeVar

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field, ValidationError
from starlette.datastructures import UploadFile

from httpkit.errors import APIError
from rag import sources
from rag.budget import Budget, Cancelled
from rag.types import Document
from worker.deps import RagDep, SettingsDep

router = APIRouter()


class TextInput(BaseModel):
    text: str = Field(min_length=1, max_length=10_000_000)
    source: str = Field(min_length=1, max_length=1000, description="a name for the text; its identity")


class IngestJson(BaseModel):
    collection: str = "default"
    texts: list[TextInput] = Field(default_factory=list, max_length=1000)
    paths: list[str] = Field(default_factory=list, max_length=1000,
                             description="files or folders under the worker's allowed roots")


_INGEST_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": IngestJson.model_json_schema()},
    "multipart/form-data": {"schema": {"type": "object", "required": ["files"], "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "collection": {"type": "string"}}}}}}}


async def _read_form(request: Request, limit: int) -> tuple[str, list[tuple[str, bytes]]]:
    form = await request.form(max_files=1000, max_fields=100)
    files = []
    for item in form.getlist("files") + form.getlist("file"):
        if not isinstance(item, UploadFile):
            raise APIError(400, "`files` must be file uploads")
        data = await item.read(limit + 1)
        if len(data) > limit:
            raise APIError(413, f"{item.filename}: over the upload limit of {limit} bytes", code="payload_too_large")
        files.append((item.filename or "upload", data))
    collection = form.get("collection") or "default"
    if not isinstance(collection, str):
        raise APIError(400, "`collection` must be a text field")
    if not files:
        raise APIError(400, "no files in the form (send them as `files`)")
    return collection, files


def _json_request(raw: bytes) -> IngestJson:
    try:
        body = IngestJson.model_validate_json(raw)
    except ValidationError as e:
        raise APIError(400, f"not a valid ingest request: {e.errors()[0]['msg']} at "
                            f"{'.'.join(map(str, e.errors()[0]['loc'])) or 'the body'}") from e
    if not body.texts and not body.paths:
        raise APIError(400, "nothing to ingest: give texts, paths, or upload files")
    return body


def _json_documents(body: IngestJson, settings, budget: Budget) -> list[Document]:
    docs = [sources.from_text(t.text, t.source) for t in body.texts]
    paths = sources.expand(body.paths, settings.allowed_roots) if body.paths else []
    return docs + [sources.from_path(p, settings.max_upload_bytes, budget.fresh()) for p in paths]


T = TypeVar("T")


async def _unless_gone(request: Request, budget: Budget, work: Callable[[], T]) -> T:
    """Run `work` in a thread; cancel its budget as soon as the client disconnects, or when
    the server cancels this handler. The body is read by now, so the next ASGI message is
    the disconnect (Request.is_disconnected would miss it behind an HTTP middleware)."""
    task = asyncio.ensure_future(run_in_threadpool(work))
    gone = asyncio.ensure_future(request.receive())
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if gone.done() and gone.result().get("type") == "http.disconnect":
            budget.cancel()
        await asyncio.wait({task})
    except asyncio.CancelledError:
        budget.cancel()
        raise
    finally:
        gone.cancel()
    try:
        return task.result()
    except Cancelled as e:
        raise APIError(499, str(e), code="client_closed_request") from e


@router.post("/ingest", openapi_extra=_INGEST_BODY)
async def ingest(request: Request, rag: RagDep, settings: SettingsDep) -> dict:
    """Index documents; the same content again is a no-op, changed content replaces."""
    budget = Budget(settings.ingest_seconds, settings.max_pdf_pages, settings.max_doc_chunks)
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        collection, files = await _read_form(request, settings.max_upload_bytes)
        read = lambda: [sources.from_bytes(data, name, budget=budget.fresh()) for name, data in files]  # noqa: E731
    else:
        body = _json_request(await request.body())
        collection, read = body.collection, lambda: _json_documents(body, settings, budget)  # noqa: E731
    docs = await _unless_gone(request, budget, read)      # parse every input before writing any
    results = await _unless_gone(request, budget, lambda: rag.ingest_many(docs, collection, budget=budget.fresh()))
    return {"collection": collection, "documents": results}


@router.get("/collections")
def collections(rag: RagDep) -> dict:
    """The collection names."""
    return {"collections": rag.store.collections()}


@router.delete("/collections/{name}")
def drop_collection(name: str, rag: RagDep) -> dict:
    """Delete a collection and everything in it."""
    return {"collection": name, "deleted_chunks": rag.delete(name)}


@router.get("/documents")
def documents(rag: RagDep, collection: str = "default") -> dict:
    """The documents in a collection, with their chunk and page counts."""
    return {"collection": collection, "documents": rag.documents(collection)}


@router.delete("/documents")
def delete_document(rag: RagDep, collection: str = "default",
                    doc_id: str | None = Query(None, max_length=64),
                    source: str | None = Query(None, max_length=1000)) -> dict:
    """Delete one document, named by doc_id or by source."""
    if not doc_id and not source:
        raise APIError(400, "say which document: doc_id or source")
    n = rag.delete(collection, doc_id=doc_id, source=source)
    if n == 0:
        raise APIError(404, f"no document {doc_id or source!r} in {collection!r}", code="not_found_error")
    return {"collection": collection, "deleted_chunks": n}


class SearchRequest(BaseModel):
    query: str = Field(min_length=1, max_length=10_000)
    collection: str = "default"
    k: int = Field(5, ge=1, le=100)
    mode: Literal["hybrid", "vector", "bm25"] = "hybrid"
    rerank: str | None = Field(None, max_length=64, description="none | prf | embedding | cross-encoder | llm; "
                                                                "default: the worker's setting")
    fusion: Literal["convex", "rrf"] | None = Field(None, description="default: the worker's setting")


@router.post("/search")
def search(req: SearchRequest, rag: RagDep, settings: SettingsDep) -> dict:
    """Hybrid (vector + BM25, fused) search, reranked; hits carry source, page and chunk id."""
    rerank = settings.search_rerank if req.rerank is None else req.rerank
    hits = rag.search(req.query, req.collection, req.k, req.mode, None if rerank == "none" else rerank, req.fusion)
    return {"collection": req.collection, "mode": req.mode, "rerank": rerank,
            "results": [{"chunk_id": h.chunk_id, "doc_id": h.doc_id, "source": h.source, "page": h.page,
                         "section": h.section, "text": h.text, "score": h.score, "scores": h.scores} for h in hits]}
