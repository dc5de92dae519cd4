"""samevm worker [--host 127.0.0.1] [--port 8082]: serve the local worker (SQL, RAG,
embeddings, rerank, speech). Loopback by default; any other host needs an API key."""
from __future__ import annotations

import os
import tempfile


def register(sub) -> None:
    p = sub.add_parser("worker", help="serve the local worker: SQL, RAG, embeddings, rerank, speech")
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default 8082)")
    p.add_argument("--api-key", default=None, help="required when the host is not loopback")
    p.add_argument("--allow-root", action="append", default=None, metavar="DIR",
                   help="a folder whose files ingest may read by path (repeatable)")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    # The worker shares the GPU with the runtime. A library that brings in JAX reserves 75% of GPU
    # memory at its first use: on the H100 the worker held 61 of 80 GB before the runtime loaded.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import uvicorn

    from worker.main import create_app
    from worker.settings import WorkerSettings
    ws = WorkerSettings.from_stack(settings, host=args.host, port=args.port, api_key=args.api_key,
                                   allowed_roots=args.allow_root)
    ws.check_exposure()
    # Uploads spool to temporary files: keep them inside the data directory too.
    (ws.home / "tmp").mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(ws.home / "tmp")
    print(f"samevm worker on http://{ws.host}:{ws.port} (data in {ws.home.resolve()})")
    uvicorn.run(create_app(ws), host=ws.host, port=ws.port, log_level="info")
    return 0
