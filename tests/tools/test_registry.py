"""The registry through real dispatch: schemas from hints and docstrings, validation, envelopes."""
from __future__ import annotations

from typing import Literal

import httpx
import pytest
from jsonschema import Draft202012Validator

from tools.context import ToolContext, ToolError
from tools.registry import Registry


@pytest.fixture
def registry():
    r = Registry(ToolContext(worker_url="http://127.0.0.1:9", timeout=2))

    @r.tool(toolset="notes")
    def save_note(ctx: ToolContext, title: str, body: str, tags: list[str] | None = None,
                  priority: Literal["low", "high"] = "low") -> dict:
        """Save a note for later.

        Args:
            title: a short title
            body: the note's text,
                possibly long
            tags: labels to find it by
            priority: how urgent it is
        """
        assert isinstance(ctx, ToolContext)
        return {"title": title, "chars": len(body), "tags": tags or [], "priority": priority}

    @r.tool(toolset="math", name="divide")
    def div(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    @r.tool(toolset="net")
    def fetch_status(ctx: ToolContext) -> dict:
        """Ask the worker for its status."""
        return ctx.worker("GET", "/v1/status")

    @r.tool(toolset="math")
    def refuse(reason: str) -> None:
        """Always refuse."""
        raise ToolError(f"refused: {reason}", retryable=True)

    return r


def test_schema_from_hints_and_docstring(registry):
    fn = registry.tools["save_note"].openai()["function"]
    assert fn["description"] == "Save a note for later."
    p = fn["parameters"]
    Draft202012Validator.check_schema(p)
    assert p["required"] == ["title", "body"]
    assert "ctx" not in p["properties"]
    assert p["properties"]["body"]["description"] == "the note's text, possibly long"
    assert p["properties"]["tags"] == {"type": "array", "items": {"type": "string"}, "description": "labels to find it by"}
    assert p["properties"]["priority"]["enum"] == ["low", "high"]
    assert registry.toolsets() == ["math", "net", "notes"]
    assert [t["function"]["name"] for t in registry.openai_tools(["math"])] == ["divide", "refuse"]


def test_dispatch_returns_envelopes(registry):
    assert registry.call("save_note", {"title": "t", "body": "abc"}) == {
        "ok": True, "data": {"title": "t", "chars": 3, "tags": [], "priority": "low"}}
    assert registry.call("save_note", '{"title": "t", "body": "x", "priority": "high"}')["data"]["priority"] == "high"
    assert registry.call("divide", {"a": 1, "b": 4}) == {"ok": True, "data": 0.25}


@pytest.mark.parametrize("args, fragment", [
    ({"title": "t"}, "'body' is a required property"),
    ({"title": "t", "body": 3}, "body: 3 is not of type 'string'"),
    ({"title": "t", "body": "b", "priority": "urgent"}, "priority: 'urgent' is not one of"),
    ({"title": "t", "body": "b", "color": "red"}, "Additional properties are not allowed"),
    ('{"title": ', "arguments are not valid JSON"),
])
def test_bad_arguments_become_observations(registry, args, fragment):
    out = registry.call("save_note", args)
    assert out["ok"] is False and fragment in out["error"] and out["retryable"] is False


def test_tool_failures_are_observations_and_handler_bugs_raise(registry):
    with pytest.raises(ZeroDivisionError):          # a bug in our code is not the model's to correct
        registry.call("divide", {"a": 1, "b": 0})
    refused = registry.call("refuse", {"reason": "busy"})
    assert refused == {"ok": False, "error": "refused: busy", "retryable": True}
    unreachable = registry.call("fetch_status")
    assert unreachable["ok"] is False and unreachable["retryable"] is True and "cannot reach" in unreachable["error"]
    unknown = registry.call("nope")
    assert unknown["ok"] is False and "available: divide" in unknown["error"]


def test_http_errors_carry_the_servers_message():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/busy":
            return httpx.Response(503, json={"detail": "loading"})
        return httpx.Response(400, json={"error": {"message": "no such table: x"}})
    ctx = ToolContext(worker_url="http://w")
    ctx._client = httpx.Client(transport=httpx.MockTransport(handler))
    with pytest.raises(ToolError) as bad:
        ctx.worker("POST", "/v1/sql/query")
    assert "no such table: x" in str(bad.value) and not bad.value.retryable
    with pytest.raises(ToolError) as busy:
        ctx.worker("GET", "/busy")
    assert "loading" in str(busy.value) and busy.value.retryable


def test_duplicate_names_and_undocumented_tools_are_refused(registry):
    def other(a: int) -> int:
        """Another divide."""
        return a
    with pytest.raises(ValueError, match="registered twice"):
        registry.tool(toolset="math", name="divide")(other)

    def nodoc(a: int) -> int:
        return a
    with pytest.raises(ValueError, match="needs a docstring"):
        registry.tool(toolset="x")(nodoc)


def test_null_for_an_optional_argument_means_not_given(registry):
    out = registry.call("save_note", {"title": "t", "body": "b", "tags": None, "priority": None})
    assert out == {"ok": True, "data": {"title": "t", "chars": 1, "tags": [], "priority": "low"}}
    required = registry.call("save_note", {"title": None, "body": "b"})
    assert required["ok"] is False and "title: None is not of type 'string'" in required["error"]
    assert "must be a JSON object" in registry.call("save_note", "[1, 2]")["error"]
