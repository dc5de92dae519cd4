"""Paged KV blocks with reference counts and a hash-chained prefix cache.

A full block's hash covers its tokens and the previous block's hash, so equal hashes mean
equal prefixes. Blocks are registered only once their K/V are computed. A block nobody
references goes to the free list but keeps its hash: a later request with the same prefix
takes it back; allocation reuses the least recently freed block first (LRU eviction).
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from runtime.engine.sequence import Sequence


def block_hash(previous: bytes, tokens: list[int]) -> bytes:
    return hashlib.blake2b(previous + np.asarray(tokens, dtype=np.int64).tobytes(), digest_size=16).digest()


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int):
        assert num_blocks > 0 and block_size > 0
        self.num_blocks, self.block_size = num_blocks, block_size
        self.ref_count = [0] * num_blocks
        self.block_hash: list[bytes | None] = [None] * num_blocks
        self.hash_to_block: dict[bytes, int] = {}
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))  # LRU first
        self.hits = 0          # prompt tokens served from cache, for metrics
        self.lookups = 0       # prompt tokens looked up

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free)

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _take(self) -> int:
        block, _ = self.free.popitem(last=False)
        old = self.block_hash[block]
        if old is not None:                  # evict its cached content
            del self.hash_to_block[old]
            self.block_hash[block] = None
        self.ref_count[block] = 1
        return block

    def _cached_prefix(self, seq: Sequence) -> tuple[list[int], bytes]:
        """Cached blocks matching the sequence's leading full blocks (leaving >= 1 token to
        compute) and the hash of the last one."""
        blocks, previous = [], b""
        usable = (len(seq) - 1) // self.block_size
        for i in range(usable):
            h = block_hash(previous, seq.token_ids[i * self.block_size:(i + 1) * self.block_size])
            block = self.hash_to_block.get(h)
            if block is None:
                break
            blocks.append(block)
            previous = h
        return blocks, previous

    def can_allocate(self, seq: Sequence) -> bool:
        cached, _ = self._cached_prefix(seq)
        reclaimable = sum(1 for b in cached if self.ref_count[b] == 0)
        return self.blocks_needed(len(seq)) - len(cached) + reclaimable <= self.num_free

    def allocate(self, seq: Sequence) -> None:
        """Give a waiting sequence blocks for all its tokens, reusing its cached prefix."""
        assert not seq.block_table
        cached, seq.prefix_hash = self._cached_prefix(seq)
        for block in cached:
            if self.ref_count[block] == 0:
                del self.free[block]
            self.ref_count[block] += 1
        seq.block_table = cached + [self._take() for _ in range(self.blocks_needed(len(seq)) - len(cached))]
        seq.num_computed = len(cached) * self.block_size
        seq.num_hashed_blocks = len(cached)
        if seq.num_output == 0:
            seq.num_cached_prompt = seq.num_computed
            self.hits += seq.num_computed
            self.lookups += len(seq)

    def allocate_uncached(self, seq: Sequence) -> None:
        """Fresh blocks for all tokens, ignoring the prefix cache (for scoring whole prompts)."""
        assert not seq.block_table and self.blocks_needed(len(seq)) <= self.num_free
        seq.block_table = [self._take() for _ in range(self.blocks_needed(len(seq)))]

    def can_append(self, seq: Sequence) -> bool:
        return self.blocks_needed(len(seq)) - len(seq.block_table) <= self.num_free

    def append(self, seq: Sequence) -> None:
        """Make room for every token of `seq` (after it grew by a sampled token)."""
        while len(seq.block_table) < self.blocks_needed(len(seq)):
            seq.block_table.append(self._take())

    def register_computed(self, seq: Sequence) -> None:
        """Hash and publish the sequence's full blocks whose K/V are now in the cache."""
        full = seq.num_computed // self.block_size
        previous = seq.prefix_hash
        for i in range(seq.num_hashed_blocks, full):
            block = seq.block_table[i]
            h = block_hash(previous, seq.token_ids[i * self.block_size:(i + 1) * self.block_size])
            if h not in self.hash_to_block:
                self.hash_to_block[h] = block
                self.block_hash[block] = h
            previous = h
        seq.prefix_hash = previous
        seq.num_hashed_blocks = max(seq.num_hashed_blocks, full)

    def free_seq(self, seq: Sequence) -> None:
        for block in reversed(seq.block_table):   # tail first: the prefix stays cached longest
            self.ref_count[block] -= 1
            assert self.ref_count[block] >= 0
            if self.ref_count[block] == 0:
                self.free[block] = None
        seq.block_table = []
        seq.num_computed = 0
        seq.num_hashed_blocks = 0
        seq.prefix_hash = b""
