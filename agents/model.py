"""The agent's view of the runtime: one chat completion over the OpenAI-compatible API.

`ChatModel.complete` returns a `Reply` with the parsed tool calls, the text, why the
generation stopped, the runtime's `samevm.awareness` uncertainty summary and
`samevm.tool_call_errors` (calls the server refused to promote: bad JSON, unknown tool,
arguments that fail the schema). An unreachable runtime or an HTTP error is not the
model's mistake: it raises ModelError, and the turn fails loudly.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx

from httpkit.client import client


class ModelError(RuntimeError):
    """The runtime could not answer (down, overloaded, or refused the request)."""


@dataclass(slots=True)
class Call:
    id: str
    name: str
    arguments: dict | str          # a dict when the text parsed as a JSON object

    @property
    def key(self) -> tuple[str, str]:
        """Identity for repeat detection: the name and the canonical JSON of the arguments."""
        args = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments, sort_keys=True)
        return self.name, args

    def openai(self) -> dict:
        args = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": args}}


@dataclass(slots=True)
class Reply:
    content: str
    calls: list[Call]
    finish_reason: str
    awareness: dict = field(default_factory=dict)
    call_errors: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


def _parse_arguments(text: str) -> dict | str:
    try:
        parsed = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return text
    return parsed if isinstance(parsed, dict) else text


class ChatModel:
    """A model served over /v1/chat/completions (samevm's runtime, or any compatible server)."""

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None,
                 timeout: float = 600.0):
        self.http = client(base_url, api_key, timeout)
        self._model = model

    @property
    def model(self) -> str:
        """The model id to ask for; the runtime's first model unless one was given."""
        if self._model is None:
            self._model = self.info()["id"]
        return self._model

    def info(self) -> dict:
        """The served model's entry from /v1/models (id, context length, backend, revision)."""
        return self._get("/v1/models")["data"][0]

    def complete(self, messages: list[dict], tools: list[dict] | None = None,
                 tool_choice: str | dict = "auto", max_tokens: int = 256, temperature: float = 0.0,
                 seed: int | None = None, parallel: bool = True, text_regex: str | None = None) -> Reply:
        """One chat completion; `text_regex` constrains a text reply (samevm's structured_outputs)."""
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                "temperature": temperature}
        if text_regex is not None:
            body["structured_outputs"] = {"regex": text_regex}
        if tools:
            body.update(tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel)
        if seed is not None:
            body["seed"] = seed
        start = time.monotonic()
        data = self._post("/v1/chat/completions", body)
        choice = data["choices"][0]
        message = choice["message"]
        ext = data.get("samevm") or {}
        usage = data.get("usage") or {}
        calls = [Call(c["id"], c["function"]["name"], _parse_arguments(c["function"].get("arguments") or ""))
                 for c in message.get("tool_calls") or []]
        return Reply(content=message.get("content") or "", calls=calls, finish_reason=choice["finish_reason"],
                     awareness=ext.get("awareness") or {}, call_errors=list(ext.get("tool_call_errors") or []),
                     prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0),
                     latency_s=time.monotonic() - start)

    def _get(self, path: str) -> dict:
        return self._checked(lambda: self.http.get(path), path)

    def _post(self, path: str, body: dict) -> dict:
        return self._checked(lambda: self.http.post(path, json=body), path)

    def _checked(self, send, path: str) -> dict:
        try:
            r = send()
        except httpx.HTTPError as e:
            raise ModelError(f"cannot reach the model at {self.http.base_url}{path}: {e}") from e
        if r.status_code >= 400:
            raise ModelError(f"{r.status_code} from {self.http.base_url}{path}: {r.text[:500]}")
        return r.json()

    def close(self) -> None:
        self.http.close()
