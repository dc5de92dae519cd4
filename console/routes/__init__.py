"""The console's own endpoints under /api, one module per concern."""
from fastapi import APIRouter

from console.routes import agent, suites, tools

api_router = APIRouter()
api_router.include_router(tools.router, prefix="/tools", tags=["tools"])
api_router.include_router(agent.router, prefix="/agent", tags=["agent"])
api_router.include_router(suites.router, prefix="/suites", tags=["suites"])
