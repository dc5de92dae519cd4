"""A request's tokens and its place in the engine: status, KV blocks, progress."""
from __future__ import annotations

import itertools
import time
from enum import Enum, auto

from runtime.sampling import Awareness, SamplingParams


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    _ids = itertools.count()

    def __init__(self, token_ids: list[int], params: SamplingParams, request_id: str | None = None):
        assert token_ids, "a sequence needs at least one token"
        self.seq_id = next(Sequence._ids)
        self.request_id = request_id or f"seq-{self.seq_id}"
        self.token_ids = list(token_ids)
        self.num_prompt_tokens = len(token_ids)
        self.params = params
        self.status = Status.WAITING
        self.block_table: list[int] = []
        self.num_computed = 0        # tokens whose K/V are in the cache
        self.num_hashed_blocks = 0   # leading full blocks registered in the prefix cache
        self.prefix_hash = b""       # chained hash of those blocks
        self.num_cached_prompt = 0   # prompt tokens served from the prefix cache (reported)
        self.finish_reason: str | None = None
        self.text = ""               # detokenized output, cut at a stop string
        self.emitted = 0             # characters of text already released to the caller
        self.prefix_offset = 0       # incremental detokenization window over output ids
        self.read_offset = 0
        self.awareness = Awareness()
        self.logprobs: list[tuple[int, float, list[tuple[int, float]]]] = []
        self.arrival = time.monotonic()
        self.first_token_time: float | None = None

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_output(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def is_finished(self) -> bool:
        return self.status == Status.FINISHED

    @property
    def remaining(self) -> int:
        """Tokens still to run through the model before the next token can be sampled."""
        return len(self.token_ids) - self.num_computed
