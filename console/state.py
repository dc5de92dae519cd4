"""What the console's own endpoints share: the configuration, the tool registry (bound to the
stack's worker and runtime), and the agent-loop conversations of the chat page."""
from __future__ import annotations

import threading
from collections import OrderedDict

from agents.config import AgentConfig
from agents.loop import Agent
from agents.model import ChatModel
from console.config import ConsoleConfig
from tools.context import ToolContext
from tools.sql import table_lister
from tools.toolsets import build_registry

MAX_CONVERSATIONS = 32       # agent-loop conversations kept; the oldest goes first


class ConsoleState:
    def __init__(self, config: ConsoleConfig):
        self.config = config
        self.registry = build_registry(ToolContext(worker_url=config.worker_url, runtime_url=config.runtime_url,
                                                   api_key=config.api_key, home=config.home))
        self._agents: OrderedDict[str, Agent] = OrderedDict()
        self._lock = threading.Lock()

    def model(self) -> ChatModel:
        return ChatModel(self.config.runtime_url, api_key=self.config.api_key)

    def agent(self, conversation: str, config: AgentConfig) -> Agent:
        """The agent of a conversation (its earlier turns carried), made on first use."""
        with self._lock:
            agent = self._agents.pop(conversation, None)
            if agent is None:
                agent = Agent(self.model(), self.registry, config, tables=table_lister(self.registry))
            agent.config = config                 # the page's current settings apply from this turn on
            self._agents[conversation] = agent
            while len(self._agents) > MAX_CONVERSATIONS:
                _, old = self._agents.popitem(last=False)
                old.model.close()
            return agent

    def forget(self, conversation: str) -> bool:
        with self._lock:
            agent = self._agents.pop(conversation, None)
        if agent is not None:
            agent.model.close()
        return agent is not None

    def close(self) -> None:
        with self._lock:
            for agent in self._agents.values():
                agent.model.close()
            self._agents.clear()
        self.registry.context.close()
