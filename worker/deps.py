"""Route dependencies as Annotated aliases: a route asks for `RagDep` and gets the index."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from rag.embedding import Embedder
from rag.index import RagIndex
from rag.rerank import Rerankers
from training.jobs import JobManager
from worker.services import Services
from worker.settings import WorkerSettings
from worker.speech import Stt, Tts
from worker.sql import SqlService


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def _part(attr: str):
    def get(services: ServicesDep):
        return getattr(services, attr)
    get.__name__ = f"get_{attr}"
    return Depends(get)


SettingsDep = Annotated[WorkerSettings, _part("settings")]
SqlDep = Annotated[SqlService, _part("sql")]
RagDep = Annotated[RagIndex, _part("rag")]
EmbedderDep = Annotated[Embedder, _part("embedder")]
RerankersDep = Annotated[Rerankers, _part("rerankers")]
TtsDep = Annotated[Tts, _part("tts")]
SttDep = Annotated[Stt, _part("stt")]
JobsDep = Annotated[JobManager, _part("jobs")]
