"""Retrieval over documents and PDFs, usable in-process (CLI, benchmarks) or behind the worker.

sources -> pages (PDF pages keep their numbers) -> chunking (token windows sized to the
embedding model) -> store (chromadb, our own embedding function) + bm25 (bm25s) ->
fusion (reciprocal rank) -> rerank. `RagIndex` in rag/index.py ties them together.
Bad input raises rag.errors.InputError; a missing collection or document NotFoundError.
"""
