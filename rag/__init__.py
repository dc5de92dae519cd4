"""Retrieval over documents and PDFs, usable in-process (CLI, benchmarks) or behind the worker.

sources (regular files only) -> pages (rag.pdf over rag.extract: pdftotext, else pdfium;
physical page numbers, running heads dropped, section headings from the PDF outline by
rag.outline) -> chunking (128-token windows cut at sentence ends; each knows its heading
path and whether its page is a contents/index page) -> store (chromadb, our own embedding
function) -> corpus (the collection in memory: stored vectors + BM25 over rag.words terms
of heading path + text) -> fusion (convex by default; contents pages a little lower) ->
optional rerank. `RagIndex` in rag/index.py ties them together; rag.budget bounds what one
document may cost. Bad input raises rag.errors.InputError; a missing collection or
document NotFoundError.
"""
