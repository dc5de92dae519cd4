"""Ingest a PDF and answer a question about it, citing pages.

    python demos/rag_pdf.py /usr/share/R/doc/manual/R-intro.pdf "How do I read a data frame from a file?"

Retrieval runs in this process on the data directory ($SAMEVM_HOME, default ./.samevm):
hybrid search (MiniLM vectors + BM25, fused, reranked) picks the best passages. When the
samevm runtime answers at $SAMEVM_RUNTIME_URL (default http://127.0.0.1:8081, started by
`samevm serve`), its chat model writes the answer from those passages with [p. N]
citations; otherwise the demo prints the passages themselves as the answer.
"""
from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from rag import sources  # noqa: E402
from worker.services import Services  # noqa: E402
from worker.settings import WorkerSettings  # noqa: E402

RUNTIME = os.environ.get("SAMEVM_RUNTIME_URL", "http://127.0.0.1:8081")


def ask_runtime(question: str, hits) -> str | None:
    context = "\n\n".join(f"[p. {h.page}] {h.text}" for h in hits)
    messages = [{"role": "system", "content": "Answer from the passages only, in two or three sentences. "
                                              "Cite the page of each fact as [p. N]."},
                {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}"}]
    try:
        model = httpx.get(f"{RUNTIME}/v1/models", timeout=5).json()["data"][0]["id"]
        r = httpx.post(f"{RUNTIME}/v1/chat/completions", timeout=600,
                       json={"model": model, "messages": messages, "max_tokens": 120, "temperature": 0})
        r.raise_for_status()
    except httpx.HTTPError as e:
        print(f"(no runtime at {RUNTIME}: {type(e).__name__}; answering with the passages)\n")
        return None
    return r.json()["choices"][0]["message"]["content"].strip()


def main(pdf: str, question: str) -> None:
    index = Services(WorkerSettings()).rag
    print(index.ingest(sources.from_path(Path(pdf), 1 << 30), "demo"))
    hits = index.search(question, "demo", k=3)
    answer = ask_runtime(question, hits)
    print(f"Q: {question}\n")
    if answer:
        print(textwrap.fill(answer, 100), "\n")
    for h in hits:
        print(f"[p. {h.page}] (score {h.score:.2f}) " + textwrap.shorten(h.text, 240))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
