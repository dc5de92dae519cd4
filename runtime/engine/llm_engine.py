"""The engine: add_request / step / abort, and generate() on top of them.

Not thread-safe: one thread owns an engine and calls step() in a loop; the server talks
to that thread through queues.

On a backend that overlaps steps (CUDA), step() queues the next forward pass before it reads
the tokens of the one in flight, so the GPU is never idle while Python schedules, packs and
detokenizes. The step in flight is an `InFlight`: each sequence it samples for holds a
placeholder id -(row + 1) at the end of its tokens, which the device resolves when it is an
input (backends/__init__.py) and the host overwrites when the step is collected. A sequence
that stops there has run one step too many; that result is dropped. Steps are not overlapped
while a sequence in flight needs its token on the host first: a grammar mask or penalties
for its next sampling, or a sure finish (max_tokens, the context end).
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from dataclasses import dataclass, field

from runtime.backends import Ops, create_backend
from runtime.config import EngineConfig
from runtime.engine.block_manager import BlockManager
from runtime.engine.model_runner import ModelRunner
from runtime.engine.scheduler import Scheduler
from runtime.engine.sequence import Sequence
from runtime.gguf import GGUFModel, load_gguf, quick_digest
from runtime.lora import Adapter, load_adapter, revision_suffix
from runtime.lora_merge import merge_adapter
from runtime.models import build_model
from runtime.sampling import SampleOutput, SamplingParams
from runtime.tokenizer import Tokenizer

log = logging.getLogger(__name__)
MAX_DEFAULT_LEN = 32768


def kv_layout(config: EngineConfig, spec, ops: Ops) -> tuple[int, int]:
    """(KV blocks, the longest sequence): the blocks that fit config's KV budget at the
    backend's cache element size, and the context capped by them."""
    element = 4 if getattr(ops, "dtype", None) is None else ops.dtype.itemsize
    kv_bytes_per_token = 2 * spec.n_layers * spec.n_kv_heads * spec.head_dim * element
    num_blocks = config.num_kv_blocks or max(1, config.kv_cache_mb * 2**20 // (kv_bytes_per_token * config.block_size))
    limit = config.max_model_len or min(spec.context_length, MAX_DEFAULT_LEN)
    return num_blocks, min(limit, num_blocks * config.block_size)


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """What a load reads before it builds anything: the GGUF parsed and the adapter to serve on
    it (None: the base) read and checked against it."""
    gguf: GGUFModel
    adapter: Adapter | None


def read_files(config: EngineConfig) -> ModelFiles:
    """config's GGUF and adapter, read; ModelLoadError (AdapterError for the adapter) says what
    is wrong, before any weights are built."""
    gguf = load_gguf(config.model)
    return ModelFiles(gguf, load_adapter(config.lora, gguf.spec) if config.lora else None)


class RequestError(ValueError):
    """A request the engine cannot take (too long, bad token ids), with the reason."""


@dataclass(slots=True)
class StepOutput:
    seq: Sequence
    token_ids: list[int]       # tokens sampled this step
    text: str                  # text released this step
    finished: bool
    num_output: int            # output tokens so far (seq.num_output may count one still in flight)
    error: str | None = None   # the request failed in the engine (finished, alone)

    @property
    def request_id(self) -> str:
        return self.seq.request_id


@dataclass(slots=True)
class InFlight:
    """A launched step: the sequences it samples for, where each one's placeholder is, and
    the sampling whose result() brings the tokens."""
    sampled: list[Sequence]
    at: list[int]
    pending: object


@dataclass(slots=True)
class Completion:
    request_id: str
    text: str
    token_ids: list[int]
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int
    awareness: dict
    logprobs: list = field(default_factory=list)


class Detokenizer:
    """Incremental decoding: release text only once its bytes are complete, and hold back
    a tail that could still become a stop string."""

    def __init__(self, tokenizer: Tokenizer):
        self.tok = tokenizer

    def update(self, seq: Sequence) -> None:
        ids = seq.output_ids
        prefix = self.tok.decode(ids[seq.prefix_offset:seq.read_offset])
        full = self.tok.decode(ids[seq.prefix_offset:])
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            seq.text += full[len(prefix):]
            seq.prefix_offset, seq.read_offset = seq.read_offset, len(ids)

    @staticmethod
    def find_stop(seq: Sequence, checked_from: int) -> bool:
        """Cut seq.text at the first stop string found; True if one was."""
        longest = max(map(len, seq.params.stop))
        start = max(0, checked_from - longest + 1)
        hits = [i for i in (seq.text.find(s, start) for s in seq.params.stop) if i >= 0]
        if hits:
            seq.text = seq.text[:min(hits)]
        return bool(hits)

    @staticmethod
    def release(seq: Sequence) -> str:
        end = len(seq.text)
        if seq.params.stop and not seq.is_finished:
            end -= max(map(len, seq.params.stop)) - 1
        if end <= seq.emitted:
            return ""
        out, seq.emitted = seq.text[seq.emitted:end], end
        return out


class LLMEngine:
    """The engine over a model and its tokenizer. `from_gguf` builds both from a GGUF file;
    tests hand in a mock model (a `.spec` and `.run(ForwardBatch, kv) -> logits`, sampled by
    `ops`) and a byte tokenizer to check the scheduler, block manager and prefix cache."""

    def __init__(self, config: EngineConfig, model, tokenizer, ops: Ops, revision: str = "",
                 adapter: Adapter | None = None):
        self.config, self.model, self.tokenizer, self.ops = config, model, tokenizer, ops
        self.spec = spec = model.spec
        self.revision = revision or config.revision
        # the LoRA served on the base (in the model's kernels, or merged into the weights it was given)
        self.adapter: dict | None = adapter.describe() | {"mode": config.lora_mode} if adapter is not None else None
        self.block_size = config.block_size
        num_blocks, self.max_model_len = kv_layout(config, spec, ops)
        kv = ops.kv_cache(spec.n_layers, num_blocks, self.block_size, spec.n_kv_heads, spec.head_dim, spec.n_heads)
        self.blocks = BlockManager(num_blocks, self.block_size)
        self.scheduler = Scheduler(self.blocks, config.max_num_seqs, config.max_num_batched_tokens)
        self.runner = ModelRunner(model, ops, kv, self.block_size)
        self.detok = Detokenizer(tokenizer)
        self.eos_ids = set(spec.eos_ids) | ({tokenizer.eos_token_id} - {None})
        self.requests: dict[str, Sequence] = {}
        self.overlap = (config.overlap and getattr(ops, "overlaps_steps", False)
                        and config.max_num_seqs <= ops.feed_rows)
        self.in_flight: InFlight | None = None
        self.held: list[StepOutput] = []     # collected early (prompt_logits), out with the next step
        self.load_seconds = 0.0
        self.load_phases: dict[str, float] = {}     # from_gguf's seconds per phase, in order

    @classmethod
    def from_gguf(cls, config: EngineConfig, ops: Ops | None = None, files: ModelFiles | None = None) -> LLMEngine:
        """The engine for config.model: its weights on `ops` (default: config's backend), its
        tokenizer and chat template from the same file; `files`: config's files already read
        (read_files; serve reads them first to refuse a bad adapter before it starts). An
        adapter's merge runs in a thread beside the tokenizer's build: the build holds the
        GIL, the merge (one C call) does not; phase "merge" is what was left to wait for once
        the tokenizer was built."""
        phases, t0 = {}, time.monotonic()

        def done(phase: str) -> None:
            phases[phase] = time.monotonic() - t0 - sum(phases.values())

        gguf = files.gguf if files else load_gguf(config.model)
        done("gguf")
        ops = ops or create_backend(config.backend, config.cpu_dtype, config.cuda, config.kernel_cache)
        done("backend")
        num_blocks, max_model_len = kv_layout(config, gguf.spec, ops)
        adapter = files.adapter if files else load_adapter(config.lora, gguf.spec) if config.lora else None
        if adapter:
            done("lora")
        merged = adapter is not None and config.lora_mode == "merged"
        with ThreadPoolExecutor(1, thread_name_prefix="lora-merge") as pool:
            merging = pool.submit(merge_adapter, gguf, adapter, ops.merge_qtype, config.merge_cache) if merged else None
            tokenizer = Tokenizer(gguf.path, config.tokenizer_cache, metadata=gguf.metadata)
            done("tokenizer")
            if merging:
                gguf = merging.result()
                done("merge")
        model = build_model(gguf, ops, max_model_len, None if merged else adapter)
        done("weights")
        revision = config.revision or quick_digest(gguf.path) + (revision_suffix(adapter.path, adapter.sha256) if adapter else "")
        engine = cls(config, model, tokenizer, ops, revision=revision, adapter=adapter)
        done("kv_cache")
        engine.load_seconds, engine.load_phases = time.monotonic() - t0, phases
        lora = f" with LoRA {adapter.name} (rank {adapter.rank}, {config.lora_mode})" if adapter else ""
        log.info("loaded %s (%s, %d layers)%s on %s in %.1f s (%s); %d KV blocks of %d",
                 gguf.path.name, gguf.spec.arch, gguf.spec.n_layers, lora, ops.name, engine.load_seconds,
                 ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()), num_blocks, config.block_size)
        return engine

    # ---- requests --------------------------------------------------------------------
    def add_request(self, prompt: str | list[int], params: SamplingParams,
                    request_id: str | None = None) -> Sequence:
        ids = self.tokenizer.encode(prompt, add_special=True) if isinstance(prompt, str) else list(prompt)
        if not ids:
            raise RequestError("the prompt is empty")
        if len(ids) >= self.max_model_len:
            raise RequestError(f"the prompt has {len(ids)} tokens; this model's context is "
                               f"{self.max_model_len} tokens and the reply needs at least one")
        if min(ids) < 0 or max(ids) >= self.spec.vocab:
            raise RequestError(f"token ids must be in [0, {self.spec.vocab})")
        if request_id in self.requests:
            raise RequestError(f"duplicate request id {request_id!r}")
        seq = Sequence(ids, params, request_id)
        self.requests[seq.request_id] = seq
        self.scheduler.add(seq)
        return seq

    def abort(self, request_id: str) -> bool:
        seq = self.requests.pop(request_id, None)
        if seq is None:
            return False
        seq.finish_reason = "abort"
        self.scheduler.finish(seq)
        while seq.token_ids[-1] < 0:         # a placeholder of the step in flight
            seq.token_ids.pop()
        if self.in_flight is not None and all(s.is_finished for s in self.in_flight.sampled):
            self.in_flight.pending.result()  # nothing left to collect: let its copy land, drop it
            self.in_flight = None
        return True

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work() or self.in_flight is not None or bool(self.held)

    # ---- the step --------------------------------------------------------------------
    def step(self) -> list[StepOutput]:
        """Run one forward pass; returns the tokens sampled by the last one collected."""
        if self.overlap:
            return self._overlapped_step()
        scheduled = self.scheduler.schedule()
        if not scheduled:
            return []
        try:
            sampled, out = self.runner.run(scheduled)
        except Exception as e:
            return self._isolate(scheduled, e)
        return self._ran(scheduled, sampled, out)

    def _ran(self, scheduled: list[tuple[Sequence, int]], sampled: list[Sequence],
             out: SampleOutput) -> list[StepOutput]:
        for seq, n in scheduled:
            seq.num_computed += n
            self.blocks.register_computed(seq)
        for i, seq in enumerate(sampled):
            seq.token_ids.append(int(out.token_ids[i]))
        return [self._accept_or_fail(seq, i, out) for i, seq in enumerate(sampled)]

    # ---- one sequence's failure is its own ------------------------------------------
    def _isolate(self, scheduled: list[tuple[Sequence, int]], error: Exception) -> list[StepOutput]:
        """The batch failed before any state changed: run each sequence alone (its K/V
        slots are rewritten with the same values), so only the ones that fail alone fail."""
        if len(scheduled) == 1:
            return [self._fail(scheduled[0][0], error)]
        log.warning("a batch of %d failed (%s: %s); running its sequences one by one",
                    len(scheduled), type(error).__name__, error)
        outputs = []
        for seq, n in scheduled:
            if seq.is_finished:
                continue
            try:
                sampled, out = self.runner.run([(seq, n)])
            except Exception as e:
                outputs.append(self._fail(seq, e))
                continue
            outputs += self._ran([(seq, n)], sampled, out)
        return outputs

    def _accept_or_fail(self, seq: Sequence, row: int, out: SampleOutput) -> StepOutput:
        try:
            return self._accept(seq, row, out)
        except Exception as e:       # e.g. its grammar refuses the token: the others go on
            return self._fail(seq, e)

    def _fail(self, seq: Sequence, error: Exception) -> StepOutput:
        log.error("request %s failed in the engine: %s: %s", seq.request_id, type(error).__name__, error,
                  exc_info=error)
        seq.finish_reason = "error"
        while seq.token_ids[-1] < 0:         # a placeholder of a step in flight
            seq.token_ids.pop()
        self.scheduler.finish(seq)
        self.requests.pop(seq.request_id, None)
        return StepOutput(seq, [], "", True, seq.num_output, error=f"{type(error).__name__}: {error}")

    def _overlapped_step(self) -> list[StepOutput]:
        previous, self.in_flight, outputs, self.held = self.in_flight, None, self.held, []
        if previous is not None and any(map(self._needs_token_first, previous.sampled)):
            outputs, previous = outputs + self._collect(previous), None
        scheduled = self.scheduler.schedule()
        if scheduled:
            try:
                sampled, pending = self.runner.launch(scheduled)
            except Exception as e:           # resolve the placeholders first: alone, each runs unoverlapped
                return outputs + (self._collect(previous) if previous is not None else []) + \
                    self._isolate(scheduled, e)
            for seq, n in scheduled:
                seq.num_computed += n
        if previous is not None:
            outputs += self._collect(previous)
        if scheduled:
            for seq, _ in scheduled:
                if not seq.is_finished:
                    self.blocks.register_computed(seq)
            if sampled:
                at = []
                for row, seq in enumerate(sampled):
                    at.append(len(seq.token_ids))
                    if not seq.is_finished:
                        seq.token_ids.append(-(row + 1))
                self.in_flight = InFlight(sampled, at, pending)
        return outputs

    def _needs_token_first(self, seq: Sequence) -> bool:
        """Whether the next step for seq must wait until its token in flight is on the host."""
        p = seq.params
        return (p.constraint is not None or p.repetition_penalty != 1.0 or bool(p.presence_penalty)
                or bool(p.frequency_penalty) or seq.num_output >= p.max_tokens
                or len(seq) >= self.max_model_len)

    def _collect(self, step: InFlight) -> list[StepOutput]:
        out = step.pending.result()
        outputs = []
        for row, (seq, at) in enumerate(zip(step.sampled, step.at)):
            if seq.is_finished:              # finished or aborted since the step was launched
                continue
            seq.token_ids[at] = int(out.token_ids[row])
            outputs.append(self._accept_or_fail(seq, row, out))
        return outputs

    def _accept(self, seq: Sequence, row: int, out: SampleOutput) -> StepOutput:
        """Bookkeeping for the token just stored at the end of seq (row `row` of out)."""
        token = seq.token_ids[-1]
        p = seq.params
        if seq.first_token_time is None:
            seq.first_token_time = time.monotonic()
        seq.awareness.add(float(out.logprobs[row]), float(out.entropy[row]))
        if p.logprobs is not None:
            top = [] if not p.logprobs else list(zip(out.top_ids[row, :p.logprobs].tolist(),
                                                     out.top_logprobs[row, :p.logprobs].tolist()))
            seq.logprobs.append((token, float(out.logprobs[row]), top))
        if p.constraint is not None:
            p.constraint.advance(token)
        reason = None
        if token in p.stop_token_ids or (token in self.eos_ids and not p.ignore_eos):
            reason = "stop"
        else:
            checked = len(seq.text)
            self.detok.update(seq)
            if p.stop and self.detok.find_stop(seq, checked):
                reason = "stop"
            elif p.constraint is not None and p.constraint.is_terminated():
                reason = "stop"
            elif seq.num_output >= p.max_tokens or len(seq) >= self.max_model_len:
                reason = "length"
        if reason:
            seq.finish_reason = reason
            self.scheduler.finish(seq)
            self.requests.pop(seq.request_id, None)
        return StepOutput(seq, [token], self.detok.release(seq), seq.is_finished, seq.num_output)

    # ---- blocking convenience --------------------------------------------------------
    def generate(self, prompts: list[str | list[int]], params: SamplingParams | list[SamplingParams]
                 ) -> list[Completion]:
        params = params if isinstance(params, list) else [params] * len(prompts)
        seqs = [self.add_request(p, sp) for p, sp in zip(prompts, params)]
        while any(not s.is_finished for s in seqs):
            self.step()
        return [self.completion(s) for s in seqs]

    def prompt_logits(self, ids: list[int]) -> np.ndarray:
        """Logits [len(ids), vocab] at every position of one uncached prefill: for parity
        checks against other implementations and for scoring. Call between steps."""
        if self.in_flight is not None:       # its placeholders read the sampler's last rows
            self.held += self._collect(self.in_flight)
            self.in_flight = None
        seq = Sequence(list(ids), SamplingParams(max_tokens=1))
        if self.blocks.blocks_needed(len(seq)) > self.blocks.num_free or len(seq) > self.max_model_len:
            raise RequestError(f"{len(seq)} tokens do not fit the free KV cache")
        self.blocks.allocate_uncached(seq)
        try:
            batch, _ = self.runner.build_batch([(seq, len(seq))])
            batch.logits_indices = np.arange(len(seq), dtype=np.int32)
            return self.ops.logits_to_host(self.model.run(batch, self.runner.kv))
        finally:
            self.blocks.free_seq(seq)

    def completion(self, seq: Sequence) -> Completion:
        return Completion(seq.request_id, seq.text, seq.output_ids, seq.finish_reason or "abort",
                          seq.num_prompt_tokens, seq.num_cached_prompt, seq.awareness.summary(),
                          seq.logprobs)

    def stats(self) -> dict:
        b = self.blocks
        return {
            "running": len(self.scheduler.running), "waiting": len(self.scheduler.waiting),
            "kv_blocks_used": b.num_used, "kv_blocks_total": b.num_blocks,
            "prefix_cache_hit_tokens": b.hits, "prefix_cache_lookup_tokens": b.lookups,
            "preemptions": self.scheduler.num_preemptions,
        }
