"""The agent's settings, one validated dataclass built at the edge (CLI, suite file) and
passed down, and the low-confidence rule the verify step branches on."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class AgentConfig:
    max_steps: int = 8             # model requests per turn
    max_errors: int = 3            # malformed calls + failed tools per turn before giving up
    max_tokens: int = 200          # per model request
    temperature: float = 0.0
    seed: int | None = None
    tool_retries: int = 1          # retryable tool failures retried before the model sees them
    retry_backoff_s: float = 0.1   # times the attempt number
    observation_chars: int = 1200  # a tool result is cut to this for the model
    steer_auto_repeats: int = 1    # repeats answered in progress mode (tools offered); then answer mode
    verify: bool = False
    verify_mean_logprob: float = -0.30   # an answer below this mean log-prob is low-confidence
    verify_low_tokens: int = 4           # ... and so is one with more low-confidence tokens

    def __post_init__(self):
        if self.max_steps < 1 or self.max_errors < 0 or self.max_tokens < 1 or self.tool_retries < 0:
            raise ValueError("max_steps and max_tokens must be >= 1; max_errors and tool_retries >= 0")


def low_confidence(awareness: dict, config: AgentConfig) -> bool:
    """Whether the runtime's uncertainty summary marks a generation as doubtful."""
    if not awareness:
        return False
    return (awareness.get("mean_logprob", 0.0) < config.verify_mean_logprob
            or awareness.get("low_confidence_tokens", 0) > config.verify_low_tokens)
