"""samevm search "QUERY" [--collection NAME] [-k 5] [--mode hybrid] [--rerank none]:
print the best chunks with source and page. Through the running worker when one answers,
otherwise in this process (as `samevm ingest`)."""
from __future__ import annotations

import textwrap


def register(sub) -> None:
    p = sub.add_parser("search", help="search ingested documents")
    p.add_argument("query")
    p.add_argument("--collection", default="default")
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "vector", "bm25"])
    p.add_argument("--rerank", default="none", help="none | prf | embedding | cross-encoder | llm")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    from worker.client import WorkerClient
    client = WorkerClient(settings.worker_url, settings.api_key)
    if client.serves(settings.home):
        hits = client.search(args.query, collection=args.collection, k=args.k, mode=args.mode, rerank=args.rerank)
    else:
        from worker.services import Services
        from worker.settings import WorkerSettings
        from rag.errors import NotFoundError
        index = Services(WorkerSettings.from_stack(settings)).rag
        try:
            found = index.search(args.query, args.collection, args.k, args.mode,
                                 None if args.rerank == "none" else args.rerank)
        except NotFoundError as e:      # the CLI reports ValueErrors as plain messages
            raise ValueError(str(e)) from e
        hits = [{"score": h.score, "source": h.source, "page": h.page, "text": h.text} for h in found]
    for i, h in enumerate(hits, 1):
        where = f"{h['source']}" + (f", page {h['page']}" if h["page"] is not None else "")
        print(f"{i}. [{h['score']:.3f}] {where}")
        print(textwrap.indent(textwrap.shorten(h["text"], 300), "   "))
    if not hits:
        print("no results")
    return 0
