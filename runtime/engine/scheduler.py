"""Continuous batching: running sequences first (decodes and unfinished prefill chunks),
then waiting ones, within a per-step token budget; preemption by recompute when the
KV blocks run out."""
from __future__ import annotations

from collections import deque

from runtime.engine.block_manager import BlockManager
from runtime.engine.sequence import Sequence, Status


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_num_seqs: int, max_num_batched_tokens: int):
        self.blocks = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[tuple[Sequence, int]]:
        """Pick (sequence, number of tokens to compute) pairs for the next forward pass."""
        budget = self.max_num_batched_tokens
        scheduled: list[tuple[Sequence, int]] = []
        queue, kept = deque(self.running), []
        while queue and budget > 0:
            seq = queue.popleft()
            while not self.blocks.can_append(seq):
                if not queue:
                    self._preempt(seq)
                    break
                self._preempt(queue.pop())           # the newest gives way
            else:
                self.blocks.append(seq)
                n = min(seq.remaining, budget)
                scheduled.append((seq, n))
                budget -= n
                kept.append(seq)
        self.running = kept + list(queue)

        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if not self.blocks.can_allocate(seq):
                break
            self.waiting.popleft()
            self.blocks.allocate(seq)
            seq.status = Status.RUNNING
            self.running.append(seq)
            n = min(seq.remaining, budget)
            scheduled.append((seq, n))
            budget -= n
        return scheduled

    def _preempt(self, seq: Sequence) -> None:
        self.blocks.free_seq(seq)
        seq.status = Status.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def finish(self, seq: Sequence) -> None:
        """Remove a sequence (finished or aborted) and free its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.blocks.free_seq(seq)
        seq.status = Status.FINISHED
