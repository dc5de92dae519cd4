"""What the worker holds: models loaded, process and system memory, GPU memory when torch
sees a GPU, and how much the data directory uses on disk."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil

from rag.lazy import Lazy


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:   # removed while we walked: it no longer counts
                continue
    return total


def gpu_memory() -> list[dict] | None:
    torch = sys.modules.get("torch")     # only when a model already imported it: no import cost
    if torch is None or not torch.cuda.is_available():
        return None
    out = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        out.append({"device": i, "name": torch.cuda.get_device_name(i), "total_bytes": total,
                    "used_bytes": total - free, "allocated_by_worker_bytes": torch.cuda.memory_allocated(i)})
    return out


def status(models: list[Lazy], home: Path) -> dict:
    vm = psutil.virtual_memory()
    return {
        "models": [{"name": m.name, "kind": m.kind, "loaded": m.loaded,
                    "load_seconds": round(m.load_seconds, 3) if m.load_seconds else None} for m in models],
        "memory": {"process_rss_bytes": psutil.Process().memory_info().rss,
                   "system_total_bytes": vm.total, "system_available_bytes": vm.available},
        "gpu": gpu_memory(),
        "data_dir": {"path": str(Path(home).resolve()), "bytes": dir_bytes(Path(home))},
    }
