"""A scripted OpenAI-compatible model server on loopback, for testing the agent loop through
its real HTTP client: each POST /v1/chat/completions gets the next scripted reply (or the
answer of a function of the request), and every request body is kept for assertions."""
from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

CARD = {"id": "fake-model", "object": "model", "owned_by": "tests", "context_length": 4096,
        "revision": "rev-test", "backend": "fake"}
CONFIDENT = {"mean_logprob": -0.05, "perplexity": 1.05, "max_entropy": 0.5, "low_confidence_tokens": 0, "tokens": 10}
DOUBTFUL = {"mean_logprob": -1.2, "perplexity": 3.3, "max_entropy": 4.0, "low_confidence_tokens": 9, "tokens": 12}
_ids = itertools.count(1)


def call(name: str, **arguments) -> dict:
    """A reply with one tool call."""
    return calls((name, arguments))


def calls(*pairs: tuple[str, dict]) -> dict:
    """A reply with several tool calls at once."""
    return {"content": "", "tool_calls": [{"id": f"call_{next(_ids)}", "type": "function",
                                            "function": {"name": n, "arguments": json.dumps(a)}} for n, a in pairs],
            "finish_reason": "tool_calls"}


def answer(content: str) -> dict:
    """A reply that ends the turn: a call of the agent's final_answer tool."""
    return call("final_answer", answer=content)


def text(content: str, awareness: dict = CONFIDENT) -> dict:
    return {"content": content, "finish_reason": "stop", "awareness": awareness}


def malformed(content: str, *errors: str) -> dict:
    """Text the server could not promote to a call, with its samevm.tool_call_errors."""
    return {"content": content, "finish_reason": "stop", "errors": list(errors)}


def cut(content: str) -> dict:
    return {"content": content, "finish_reason": "length"}


class ScriptedModel:
    def __init__(self, script: list[dict] | Callable[[dict], dict], port: int = 0):
        if callable(script):
            self.next_reply = script
        else:
            replies = iter(script)
            self.next_reply = lambda body: next(replies)
        self.requests: list[dict] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedModel":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def respond(self, body: dict) -> dict:
        self.requests.append(body)
        spec = self.next_reply(body)
        message = {"role": "assistant", "content": spec.get("content")}
        if spec.get("tool_calls"):
            message["tool_calls"] = spec["tool_calls"]
        ext = {"awareness": spec.get("awareness", CONFIDENT), "revision": "rev-test", "backend": "fake"}
        if spec.get("errors"):
            ext["tool_call_errors"] = spec["errors"]
        return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": spec["finish_reason"]}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}, "samevm": ext}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/health":
                    self._send(200, {"status": "ok"})
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [CARD]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                try:
                    reply = fake.respond(body)
                except StopIteration:
                    self._send(500, {"error": {"message": "the script ran out of replies"}})
                    return
                self._send(200, reply)

            def log_message(self, *args):
                pass

        return Handler
