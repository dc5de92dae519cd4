"""Route dependencies: the console's shared state."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from console.state import ConsoleState


def get_state(request: Request) -> ConsoleState:
    return request.app.state.console


StateDep = Annotated[ConsoleState, Depends(get_state)]
