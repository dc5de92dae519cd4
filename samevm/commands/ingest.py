"""samevm ingest PATH... [--collection NAME]: index files and folders (PDF, text, Markdown).

Through the running worker when one answers at the configured worker URL (one process
then owns the chroma store; a bar over files), otherwise in this process on the same
data directory (a bar over each document's pages)."""
from __future__ import annotations

from pathlib import Path

from tqdm import tqdm


def register(sub) -> None:
    p = sub.add_parser("ingest", help="index PDFs and text files for search")
    p.add_argument("paths", nargs="+", help="files or folders")
    p.add_argument("--collection", default="default")
    p.set_defaults(func=run)


def _report(row: dict) -> None:
    print(f"{row['status']:>9}  {row['source']}  ({row['pages']} pages, {row['chunks']} chunks, id {row['doc_id']})")


def run(args, settings) -> int:
    from rag import sources
    from rag.store import check_collection_name
    from worker.client import WorkerClient
    check_collection_name(args.collection)
    files = sources.expand([Path(p) for p in args.paths], [Path("/")])   # the user's own files
    client = WorkerClient(settings.worker_url, settings.api_key)
    if client.up():
        for path in tqdm(files, desc="ingest via worker", unit="file"):
            _report(client.ingest_file(path, args.collection))
        return 0
    from worker.services import Services
    from worker.settings import WorkerSettings
    index = Services(WorkerSettings.from_stack(settings)).rag
    for path in files:
        doc = sources.from_path(path, max_bytes=1 << 40)
        with tqdm(total=len(doc.pages), desc=path.name, unit="page") as bar:
            def progress(done: int, _total: int) -> None:
                bar.update(done - bar.n)
            row = index.ingest(doc, args.collection, progress)
        _report(row)
    return 0
