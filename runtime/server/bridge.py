"""The engine thread and its bridge to the event loop.

One thread owns every LLMEngine and calls step(); nothing else touches an engine while it
serves. The event loop sends commands through a queue (add, abort, swap) and receives each
request's output as `Delta`s on an asyncio.Queue of its own, posted with
call_soon_threadsafe. A request is bound to the live engine when it is submitted, so its
revision is known before the first byte goes out. `swap` makes a new engine live between
two steps; the old one keeps stepping until its requests are done, then is dropped.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from runtime.engine.llm_engine import LLMEngine, RequestError, StepOutput
from runtime.sampling import SamplingParams

log = logging.getLogger(__name__)
IDLE_WAIT_S = 0.5      # how often an idle engine thread checks whether it should stop


@dataclass(slots=True)
class Delta:
    """What one engine step produced for one request (the last one has finished=True)."""
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list = field(default_factory=list)   # (token, logprob, [(id, logprob)...]) per token
    finished: bool = False
    finish_reason: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    awareness: dict | None = None
    error: str | None = None                        # the request could not run (RequestError) or failed
    status: int = 400                               # with error: 400 refused, 500 failed in the engine
    time: float = field(default_factory=time.monotonic)   # when the engine thread produced it


class Generation:
    """One submitted request: its engine, its output queue, and how much it has been sent."""
    _ids = itertools.count()

    def __init__(self, engine: LLMEngine, loop: asyncio.AbstractEventLoop):
        self.request_id = f"req-{next(Generation._ids)}"
        self.engine = engine
        self.revision = engine.revision
        self.backend = engine.ops.name
        self.adapter = engine.adapter         # the LoRA adapter served on the weights, or None
        self.queue: asyncio.Queue[Delta] = asyncio.Queue()
        self.finished = False             # set by the event loop when the last Delta arrives
        self._loop = loop
        self._sent_logprobs = 0           # engine thread only

    async def next(self) -> Delta:
        delta = await self.queue.get()
        self.finished = delta.finished or delta.error is not None
        return delta

    def _post(self, delta: Delta) -> None:
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, delta)
        except RuntimeError:              # the event loop has shut down; nobody is listening
            log.debug("dropped output for %s after the event loop closed", self.request_id)


class EngineLoop:
    def __init__(self, engine: LLMEngine):
        self._live = engine
        self._engines: list[LLMEngine] = [engine]          # live first, then draining ones
        self._lock = threading.Lock()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._gens: dict[str, Generation] = {}              # engine thread only
        self._stop = threading.Event()
        self._aborted = 0
        self.stats: dict = self._stats()                    # replaced after every step
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    @property
    def live(self) -> LLMEngine:
        return self._live

    # ---- called from the event loop ----------------------------------------------------
    def submit(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        with self._lock:
            gen = Generation(self._live, asyncio.get_running_loop())
            self._inbox.put(("add", gen, prompt_ids, params))
        return gen

    def abort(self, gen: Generation) -> None:
        self._inbox.put(("abort", gen))

    def swap(self, engine: LLMEngine) -> LLMEngine:
        """Make `engine` live for every request submitted from now on; returns the old one,
        which finishes what it runs."""
        with self._lock:
            old, self._live = self._live, engine
            self._inbox.put(("swap", engine))
        return old

    def close(self) -> None:
        self._stop.set()
        self._inbox.put(("wake",))
        self._thread.join(timeout=10)

    # ---- the engine thread -----------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            busy = any(e.has_unfinished() for e in self._engines)
            self._drain_inbox(block=not busy)
            for engine in list(self._engines):
                if engine.has_unfinished():
                    self._step(engine)
            # _engines[0] is live as far as this thread knows (swaps arrive in order with
            # the adds bound to the engine before them); the rest go once drained
            self._engines = self._engines[:1] + [e for e in self._engines[1:] if e.has_unfinished()]
            self.stats = self._stats()

    def _drain_inbox(self, block: bool) -> None:
        try:
            cmd = self._inbox.get(timeout=IDLE_WAIT_S) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            self._apply(cmd)
            try:
                cmd = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _apply(self, cmd: tuple) -> None:
        kind = cmd[0]
        if kind == "add":
            _, gen, ids, params = cmd
            try:
                gen.engine.add_request(ids, params, gen.request_id)
            except RequestError as e:
                gen._post(Delta(error=str(e), finished=True))
                return
            self._gens[gen.request_id] = gen
        elif kind == "abort":
            gen = cmd[1]
            if self._gens.pop(gen.request_id, None) is not None:
                self._aborted += gen.engine.abort(gen.request_id)
        elif kind == "swap":
            self._engines.insert(0, cmd[1])

    def _step(self, engine: LLMEngine) -> None:
        try:
            outputs = engine.step()
        except Exception as e:  # a failure no single sequence owns: fail this engine's requests, keep serving
            log.exception("engine step failed on revision %s", engine.revision)
            for rid, gen in list(self._gens.items()):
                if gen.engine is engine:
                    engine.abort(rid)
                    self._gens.pop(rid)
                    gen._post(Delta(error=f"internal error in the engine: {e}", status=500, finished=True))
            return
        for out in outputs:
            gen = self._gens.get(out.request_id)
            if gen is not None:
                failed = out.error is not None
                gen._post(Delta(error=f"internal error in the engine: {out.error}", status=500, finished=True)
                          if failed else self._delta(gen, out))
                if out.finished:
                    del self._gens[out.request_id]

    @staticmethod
    def _delta(gen: Generation, out: StepOutput) -> Delta:
        seq = out.seq
        new_lp = seq.logprobs[gen._sent_logprobs:]
        gen._sent_logprobs = len(seq.logprobs)
        delta = Delta(text=out.text, token_ids=list(out.token_ids), logprobs=new_lp,
                      finished=out.finished, prompt_tokens=seq.num_prompt_tokens,
                      cached_tokens=seq.num_cached_prompt, completion_tokens=out.num_output)
        if out.finished:
            delta.finish_reason = seq.finish_reason
            delta.awareness = seq.awareness.summary()
        return delta

    def _stats(self) -> dict:
        live = self._engines[0].stats()
        for other in self._engines[1:]:
            s = other.stats()
            for key in ("running", "waiting", "kv_blocks_used"):
                live[key] += s[key]
        live["draining_engines"] = len(self._engines) - 1
        live["aborted_requests"] = self._aborted
        return live
