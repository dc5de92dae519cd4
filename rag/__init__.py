"""Retrieval over documents and PDFs, usable in-process (CLI, benchmarks) or behind the worker.

sources (regular files only) -> pages (rag.pdf over rag.extract: pdftotext, else pdfium;
physical page numbers, running heads dropped) -> chunking (128-token windows cut at
sentence ends) -> store (chromadb, our own embedding function) -> corpus (the collection in
memory: stored vectors + BM25 over rag.words terms) -> fusion (convex by default) ->
optional rerank. `RagIndex` in rag/index.py ties them together; rag.budget bounds what one
document may cost. Bad input raises rag.errors.InputError; a missing collection or
document NotFoundError.
"""
