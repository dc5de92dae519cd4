"""samevm ingest PATH... [--collection NAME]: index files and folders (PDF, text, Markdown).

Through the running worker when this stack's worker (same data directory) answers at the
configured worker URL (one process then owns the chroma store; files go in batches whose
chunks are embedded together, a bar over files); refused when another stack's worker
answers there; otherwise in this process on the same data directory (a bar over each
document's chunks)."""
from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("ingest", help="index PDFs and text files for search")
    p.add_argument("paths", nargs="+", help="files or folders")
    p.add_argument("--collection", default="default")
    p.set_defaults(func=run)


BATCH_FILES, BATCH_BYTES = 32, 32 << 20     # per upload request


def _batches(files: list[Path]):
    batch, size = [], 0
    for path in files:
        if batch and (len(batch) == BATCH_FILES or size + path.stat().st_size > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += path.stat().st_size
    if batch:
        yield batch


def _report(row: dict) -> None:
    print(f"{row['status']:>9}  {row['source']}  ({row['pages']} pages, {row['chunks']} chunks, id {row['doc_id']})")


def run(args, settings) -> int:
    from tqdm import tqdm           # here, not in every samevm start (the parser imports each command)

    from rag import sources
    from rag.budget import Budget
    from rag.store import check_collection_name
    from worker.client import WorkerClient
    check_collection_name(args.collection)
    files = sources.expand([Path(p) for p in args.paths], [Path("/")])   # the user's own files
    client = WorkerClient(settings.worker_url, settings.api_key)
    if client.serves(settings.home):
        with tqdm(total=len(files), desc="ingest via worker", unit="file") as bar:
            for batch in _batches(files):
                for row in client.ingest_files(batch, args.collection):
                    _report(row)
                bar.update(len(batch))
        return 0
    from worker.services import Services
    from worker.settings import WorkerSettings
    index = Services(WorkerSettings.from_stack(settings)).rag
    budget = Budget(seconds=3600, max_pages=100_000)        # the user's own files: generous
    for batch in _batches(files):
        docs = [sources.from_path(path, 1 << 40, budget.fresh()) for path in batch]
        with tqdm(desc=f"{len(batch)} file(s)", unit="chunk") as bar:
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)
            rows = index.ingest_many(docs, args.collection, progress, budget.fresh())
        for row in rows:
            _report(row)
    return 0
