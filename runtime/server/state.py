"""What the routes share: the config, the engine loop once loaded, the grammar factory,
the revision registry and the metrics. One instance per app, on `app.state.server`."""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from httpkit.errors import APIError
from runtime.engine.llm_engine import LLMEngine
from runtime.server.bridge import EngineLoop
from runtime.server.config import ServerConfig
from runtime.server.grammar import GrammarFactory
from runtime.server.metrics import Metrics
from runtime.server.revisions import RevisionRegistry


@dataclass
class ServerState:
    config: ServerConfig
    registry: RevisionRegistry
    loop: EngineLoop | None = None
    load_error: str | None = None
    grammars: dict[str, GrammarFactory] = field(default_factory=dict)   # by tokenizer fingerprint
    reload_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    grammar_lock: threading.Lock = field(default_factory=threading.Lock)
    started_at: int = field(default_factory=lambda: int(time.time()))
    metrics: Metrics = field(init=False)

    def __post_init__(self):
        self.metrics = Metrics(lambda: self.loop.stats if self.loop else None)

    def ready(self) -> EngineLoop:
        """The engine loop, or a 503 while the model loads (or failed to)."""
        if self.loop is None:
            if self.load_error:
                raise APIError(503, f"the model failed to load: {self.load_error}", code="model_load_failed")
            raise APIError(503, "the model is loading; try again shortly", code="model_loading")
        return self.loop

    def check_model(self, name: str | None) -> None:
        if name is not None and name != self.config.model_id:
            raise APIError(404, f"The model `{name}` does not exist; this server serves "
                                f"`{self.config.model_id}`", param="model", code="model_not_found")

    def grammar_factory(self, engine: LLMEngine) -> GrammarFactory:
        """The factory for `engine`'s tokenizer, built on first use (seconds for a large
        vocabulary: the loader builds it beside the first load, before a reload goes live)."""
        key = engine.tokenizer.fingerprint
        with self.grammar_lock:
            if key not in self.grammars:
                self.grammars[key] = GrammarFactory(engine.tokenizer, engine.spec.vocab, engine.eos_ids,
                                                    slices=engine.ops.name != "cpu")    # see GrammarFactory
            return self.grammars[key]
