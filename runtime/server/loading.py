"""Bringing weights into service: the first load at startup, hot reload, and rollback.

A reload loads the new GGUF beside the live engine (in a worker thread; the live one keeps
serving), checks it against the live one (same architecture family, same tokenizer and
vocabulary, finite logits and a short greedy generation), builds its grammar tokenizer, and
only then swaps it in between two engine steps. The first load serves as soon as the engine
is built; its grammar tokenizer is built by the first request that needs one, or in the
background soon after. Refusals: 422 for a file that cannot be loaded, 409 for one that loads but
does not match or fails the smoke test; the old revision keeps serving either way.

A revision is a GGUF and, optionally, a LoRA adapter folder served on it (runtime/lora.py):
a reload may keep the live GGUF and change only the adapter, or drop it (back to the base).

Only files under the config's reload_dirs are opened (403 otherwise, decided from the
resolved path before the file is read). Each activation records the file's digest (and the
adapter's sha256); a rollback whose files no longer have them is refused (409), so a
replaced file never serves under the old revision's name.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import numpy as np

from httpkit.errors import APIError
from runtime.engine.llm_engine import LLMEngine, ModelFiles
from runtime.gguf import ModelLoadError, quick_digest
from runtime.lora import AdapterError, revision_suffix, weights_sha256
from runtime.sampling import SamplingParams
from runtime.server.bridge import EngineLoop
from runtime.server.model_digest import model_digest, same_content
from runtime.server.state import ServerState

log = logging.getLogger(__name__)
SMOKE_PROMPT = "Hello"
SMOKE_TOKENS = 4
GRAMMAR_AFTER_S = 2.0


class Refused(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def confined(state: ServerState, path: str, param: str = "path") -> Path:
    """`path` resolved, if it lies under one of the reload directories; else a 403 (nothing read)."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError, ValueError) as e:
        raise APIError(400, f"{param} cannot be resolved: {e}", param=param, code="invalid_value") from e
    dirs = state.config.reload_dirs
    if not any(resolved.is_relative_to(d.resolve()) for d in dirs):
        raise APIError(403, "reload reads only from the model and revision directories: "
                            + ", ".join(str(d) for d in dirs), param=param, code="path_not_allowed")
    return resolved


def load(state: ServerState, path: str, revision: str, adapter: str | None = None,
         files: ModelFiles | None = None) -> LLMEngine:
    """`files`: these files already read (llm_engine.read_files)."""
    cfg = dataclasses.replace(state.config.engine, model=str(path), revision=revision, lora=adapter)
    try:
        engine = LLMEngine.from_gguf(cfg, files=files)
    except AdapterError as e:
        raise Refused(422, f"cannot serve adapter {Path(adapter).name} on {Path(path).name}: {e}") from e
    except (ModelLoadError, ValueError, OSError) as e:
        raise Refused(422, f"cannot load {Path(path).name}: {e}") from e
    return engine


def check_against(new: LLMEngine, live: LLMEngine) -> None:
    if new.spec.arch != live.spec.arch:
        raise Refused(409, f"architecture {new.spec.arch!r} does not match the served {live.spec.arch!r}")
    if new.tokenizer.fingerprint != live.tokenizer.fingerprint or new.spec.vocab != live.spec.vocab:
        raise Refused(409, "its tokenizer differs from the served model's (fingerprint "
                           f"{new.tokenizer.fingerprint} vs {live.tokenizer.fingerprint})")


def smoke_test(engine: LLMEngine) -> None:
    ids = engine.tokenizer.encode(SMOKE_PROMPT, add_special=True)
    if not np.isfinite(engine.prompt_logits(ids)).all():
        raise Refused(409, "smoke test failed: its logits are not finite")
    out = engine.generate([ids], SamplingParams(max_tokens=SMOKE_TOKENS, temperature=0, ignore_eos=True))[0]
    if len(out.token_ids) != SMOKE_TOKENS or engine.blocks.num_used:
        raise Refused(409, f"smoke test failed: generated {len(out.token_ids)} of {SMOKE_TOKENS} tokens")


def prepare(state: ServerState, path: str, revision: str, live: LLMEngine, adapter: str | None) -> LLMEngine:
    """Load and check a candidate; blocking (run it in a worker thread)."""
    engine = load(state, path, revision, adapter)
    check_against(engine, live)
    smoke_test(engine)
    state.grammar_factory(engine)           # swapped in with its grammar tokenizer: no request waits on it
    return engine


def facts(engine: LLMEngine) -> dict:
    adapter = engine.adapter
    return {"arch": engine.spec.arch, "tokenizer": engine.tokenizer.fingerprint,
            "backend": engine.ops.name, "load_seconds": round(engine.load_seconds, 2),
            "adapter": engine.config.lora, "adapter_sha256": adapter and adapter["sha256"]}


def adapter_sha256(folder: str) -> str:
    try:
        return weights_sha256(folder)
    except AdapterError as e:
        raise Refused(422, str(e)) from e


def same_files(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    """(GGUF, adapter folder or None) pairs naming the same files."""
    resolve = lambda p: None if p is None else Path(p).resolve()  # noqa: E731
    return resolve(a[0]) == resolve(b[0]) and resolve(a[1]) == resolve(b[1])


def start(state: ServerState, files: ModelFiles | None = None) -> None:
    """The first load (blocking, in a thread): the registry's active revision if it was
    reloaded before and its file exists, else the configured model (`files`: its files,
    already read by samevm serve's check)."""
    cfg, registry = state.config, state.registry
    target = registry.resume_target() if cfg.resume else None
    engine = None
    entry = registry.entry(target[1]) if target else {}
    adapter = entry.get("adapter")
    if target and not same_files((target[0], adapter), (cfg.engine.model, cfg.engine.lora)):
        try:
            recorded = entry.get("digest")
            if recorded is not None and not same_content(state.config, target[0], recorded):
                raise Refused(409, f"{target[0]} changed since revision {target[1]} served")
            if adapter is not None and adapter_sha256(adapter) != entry.get("adapter_sha256"):
                raise Refused(409, f"{adapter} changed since revision {target[1]} served")
            engine = load(state, *target, adapter)
            smoke_test(engine)
            log.info("resumed revision %s from %s", target[1], target[0])
        except Refused as e:
            registry.refused(target[1], target[0], "start", e.reason)
            log.warning("could not resume revision %s (%s); serving %s", target[1], e.reason, cfg.engine.model)
            engine = None
    with ThreadPoolExecutor(1) as pool:     # the digest reads the whole file, off the GIL: beside the load
        digest = pool.submit(model_digest, state.config, engine.config.model if engine else cfg.engine.model)
        try:
            engine = engine or load(state, cfg.engine.model, cfg.engine.revision, cfg.engine.lora, files)
        except Refused as e:
            state.load_error = e.reason
            log.error("model failed to load: %s", e.reason)
            return
        registry.activated(engine.revision, engine.config.model, "start", **facts(engine), digest=digest.result())
    state.loop = EngineLoop(engine)
    # The grammar tokenizer (0.4-0.7 s from the cache, 1-2 s on a first start) is not needed for
    # a first token, and building it holds the GIL for most of that time: begun as the model
    # went live, it held /health and a first plain request back by 0.5 s. The first request with
    # a grammar (tools, response_format) builds it (waiting on the factory's lock, off the event
    # loop); failing that, it is built in the background GRAMMAR_AFTER_S after the model serves.
    later = threading.Timer(GRAMMAR_AFTER_S, state.grammar_factory, args=(engine,))
    later.name, later.daemon = "grammar-tokenizer", True
    later.start()


async def swap_in(state: ServerState, path: str | None, revision: str | None, action: str,
                  expect_digest: str | None = None, adapter: str | None = None,
                  expect_adapter: str | None = None) -> dict:
    """Reload (action "reload") or roll back (action "rollback") to `path` (None: the live
    GGUF) with the LoRA folder `adapter` (None: the base alone); returns what happened, or
    raises APIError with the reason and leaves the live revision serving. With
    `expect_digest` / `expect_adapter`, files whose content changed are refused."""
    loop = state.ready()
    if state.reload_lock.locked():
        raise APIError(409, "a reload is already in progress", code="reload_in_progress")
    async with state.reload_lock:
        live = loop.live
        path = path or live.config.model
        confined(state, path)
        if adapter is not None:
            confined(state, adapter, param="adapter")
        if not Path(path).is_file():
            state.registry.refused(revision, path, action, "no such file")
            state.metrics.reloads.labels("refused").inc()
            raise APIError(422, f"no such model file: {path}", param="path", code="model_not_found")
        digest = await anyio.to_thread.run_sync(model_digest, state.config, path)
        adapter_sha = None
        try:
            if adapter is not None:
                adapter_sha = await anyio.to_thread.run_sync(weights_sha256, adapter)
        except AdapterError as e:
            state.registry.refused(revision, path, action, str(e))
            state.metrics.reloads.labels("refused").inc()
            raise APIError(422, f"{action} refused, still serving {live.revision}: {e}", param="adapter",
                           code="adapter_not_found") from e
        base_changed = expect_digest is not None and not await anyio.to_thread.run_sync(
            same_content, state.config, path, expect_digest)
        if base_changed or expect_adapter is not None and adapter_sha != expect_adapter:
            reason = f"{path if base_changed else adapter} changed since revision {revision} served"
            state.registry.refused(None, path, action, reason)
            state.metrics.reloads.labels("refused").inc()
            raise APIError(409, f"{action} refused, still serving {live.revision}: {reason}",
                           code="revision_changed")
        revision = revision or quick_digest(path) + (revision_suffix(adapter, adapter_sha) if adapter_sha else "")
        if state.registry.conflicts(revision, path, adapter):
            raise APIError(409, f"revision {revision!r} is already registered for other files",
                           param="revision", code="revision_conflict")
        try:
            engine = await anyio.to_thread.run_sync(prepare, state, path, revision, live, adapter)
        except Refused as e:
            state.registry.refused(revision, path, action, e.reason)
            state.metrics.reloads.labels("refused").inc()
            raise APIError(e.status, f"{action} refused, still serving {live.revision}: {e.reason}",
                           code=f"{action}_refused") from e
        old = loop.swap(engine)
        state.registry.activated(revision, path, action, **facts(engine), digest=digest)
        state.metrics.reloads.labels("ok").inc()
        draining = len(old.scheduler.running) + len(old.scheduler.waiting)
        log.info("%s: %s -> %s (%d requests finish on the old one)", action, old.revision, revision, draining)
        return {"revision": revision, "previous": old.revision, "draining_requests": draining,
                "load_seconds": round(engine.load_seconds, 2)}
