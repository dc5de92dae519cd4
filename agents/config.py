"""The agent's settings, one validated dataclass built at the edge (CLI, suite file) and
passed down."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class AgentConfig:
    max_steps: int = 8             # model requests per turn
    max_errors: int = 3            # failed tool calls and cut-off replies per turn before giving up
    max_tokens: int = 400          # per model request: a call with a paragraph of text fits
    temperature: float = 0.0
    seed: int | None = None
    parallel_calls: bool = True    # a reply may hold several calls, run in the order written
    max_repeats: int = 1           # repeated calls tolerated; past that the next step must answer
    tool_retries: int = 1          # retryable tool failures retried before the model sees them
    retry_backoff_s: float = 0.1   # times the attempt number
    observation_chars: int = 1200  # a tool result is cut to this for the model
    tables_in_prompt: bool = True  # the system prompt lists the SQLite tables kept so far, with their columns
    answer_tool: bool = False      # answer by calling final_answer (every step must call) instead of in text
    answer_chars: int = 1500       # the longest final answer the grammar admits (answer_tool)

    def __post_init__(self):
        if self.max_steps < 1 or self.max_errors < 0 or self.max_tokens < 1 or self.answer_chars < 1 or self.tool_retries < 0 \
                or self.max_repeats < 0:
            raise ValueError("max_steps and max_tokens must be >= 1; max_errors, max_repeats and "
                             "tool_retries >= 0")
