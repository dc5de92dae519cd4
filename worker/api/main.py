"""All of the worker's routes, one router per resource."""
from fastapi import APIRouter

from worker.api.routes import audio, embeddings, jobs, rag, rerank, sql, status

api_router = APIRouter()
api_router.include_router(status.router, tags=["status"])
api_router.include_router(sql.router, prefix="/v1/sql", tags=["sql"])
api_router.include_router(rag.router, prefix="/v1/rag", tags=["rag"])
api_router.include_router(embeddings.router, prefix="/v1", tags=["embeddings"])
api_router.include_router(rerank.router, prefix="/v1", tags=["rerank"])
api_router.include_router(audio.router, prefix="/v1/audio", tags=["audio"])
api_router.include_router(jobs.router, prefix="/v1/jobs", tags=["jobs"])
