"""A chat request resolved into what the engine runs: prompt token ids through the model's
own template (with tools), sampling parameters, and the constraint that enforces
tool_choice required/named, strict tools under auto (calls that validate, or plain text), or
a response_format.

tool_choice "none" renders the prompt without the tools: small models imitate the call
format whenever tools are listed, and "none" is how an agent asks for a plain answer.
Assistant tool calls coming back in the history get their JSON-string arguments parsed
into objects, because chat templates serialise them with `tojson` (a string would be
rendered as an escaped string).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import jinja2

from httpkit.errors import APIError
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
from runtime.server import grammar
from runtime.server.generation import constraint_for, encode, max_new_tokens, sampling_params, structured_grammar
from runtime.server.protocol import ChatCompletionRequest, ChatMessage
from runtime.server.state import ServerState
from runtime.server.tool_schemas import ToolSchemaError, ToolSet


@dataclass(slots=True)
class ChatPlan:
    prompt_ids: list[int]
    params: SamplingParams
    tools: ToolSet | None          # set when the output is parsed for tool calls
    parallel: bool
    logprobs: bool


def _text(content) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return "".join(part.text for part in content)


def _arguments(raw):
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return raw


def template_messages(messages: list[ChatMessage]) -> list[dict]:
    out = []
    for m in messages:
        content = _text(m.content)
        d: dict = {"role": "system" if m.role == "developer" else m.role,
                   "content": content if content is not None or m.role == "assistant" else ""}
        if m.tool_calls:
            d["tool_calls"] = [{"id": tc.id, "type": "function",
                                "function": {"name": tc.function.name, "arguments": _arguments(tc.function.arguments)}}
                               for tc in m.tool_calls]
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            d["name"] = m.name
        out.append(d)
    return out


def render(engine: LLMEngine, messages: list[dict], tools: list[dict] | None,
           add_generation_prompt: bool = True) -> str:
    try:
        return engine.tokenizer.render_chat(messages, tools, add_generation_prompt=add_generation_prompt)
    except (jinja2.TemplateError, TypeError, ValueError) as e:   # the template rejects these messages
        raise APIError(400, f"the model's chat template cannot render these messages: {e}",
                       param="messages", code="invalid_messages") from e


def listed_tools(req: ChatCompletionRequest, toolset: ToolSet | None) -> list[dict] | None:
    """The tools the prompt lists: the request's, as sent, when tool_setup offers them."""
    return [t.model_dump(exclude_none=True) for t in req.tools] if toolset else None


def tool_setup(req: ChatCompletionRequest) -> tuple[ToolSet | None, str | None, dict[str, dict] | None]:
    """(tools to parse for, effective choice, tools to constrain to or None). With tool_choice
    auto, tools marked `strict: true` (OpenAI's flag for schema-exact calls) constrain the
    reply to calls of the request's tools or plain text; without it auto stays free."""
    tools = [t.model_dump(exclude_none=True) for t in req.tools or []]
    choice = req.tool_choice
    if not tools:
        if choice not in (None, "none"):
            raise APIError(400, "tool_choice needs tools", param="tool_choice", code="invalid_value")
        return None, None, None
    try:
        toolset = ToolSet.from_request(tools)
    except ToolSchemaError as e:
        raise APIError(400, str(e), param=e.param, code="invalid_tools") from e
    if choice == "none":
        return None, "none", None
    if choice in (None, "auto"):
        strict = any(t["function"].get("strict") for t in tools)
        return toolset, "auto", toolset.schemas if strict else None
    if choice == "required":
        return toolset, "required", toolset.schemas
    name = choice.function.name
    if name not in toolset.schemas:
        raise APIError(400, f"tool_choice names {name!r}, which is not among the tools",
                       param="tool_choice", code="invalid_value")
    return toolset, "named", {name: toolset.schemas[name]}


def output_grammar(req: ChatCompletionRequest, choice: str | None, forced: dict[str, dict] | None,
                   tags: tuple[str, str] = grammar.TEXT_TAGS) -> tuple[str | None, str]:
    """(grammar source or None, the parameter it comes from)."""
    fmt = req.response_format
    wants_format = fmt is not None and fmt.type != "text"
    if forced is not None:
        if wants_format or req.structured_outputs:
            raise APIError(400, "constrained tool calls (tool_choice required or named, or strict tools) "
                                "cannot also follow response_format or structured_outputs",
                           param="tool_choice", code="invalid_value")
        if choice == "auto":
            return grammar.call_or_text_grammar(forced, req.parallel_tool_calls, tags), "tools"
        return grammar.tool_calls_grammar(forced, req.parallel_tool_calls and choice == "required", tags), "tool_choice"
    if wants_format and req.structured_outputs:
        raise APIError(400, "give response_format or structured_outputs, not both",
                       param="structured_outputs", code="invalid_value")
    if wants_format:
        schema = fmt.json_schema.schema_ if fmt.type == "json_schema" else {"type": "object"}
        return grammar.json_schema_grammar(schema), "response_format"
    return structured_grammar(req), "structured_outputs"


def plan(state: ServerState, engine: LLMEngine, req: ChatCompletionRequest) -> ChatPlan:
    """Validate and resolve a chat request (blocking: renders and tokenizes)."""
    if req.top_logprobs is not None and not req.logprobs:
        raise APIError(400, "top_logprobs needs logprobs: true", param="top_logprobs", code="invalid_value")
    if req.max_tokens is not None and req.max_completion_tokens is not None:
        raise APIError(400, "give max_tokens or max_completion_tokens, not both",
                       param="max_completion_tokens", code="invalid_value")
    toolset, choice, forced = tool_setup(req)
    source, param = output_grammar(req, choice, forced,
                                   state.grammar_factory(engine).call_tags if forced is not None else grammar.TEXT_TAGS)
    text = render(engine, template_messages(req.messages), listed_tools(req, toolset))
    ids = encode(engine, text, add_special=False, param="messages")
    requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    limit = max_new_tokens(requested, len(ids), engine,
                           "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens",
                           "messages")
    constraint = constraint_for(state, engine, source, param)
    logprobs = (req.top_logprobs or 0) if req.logprobs else None
    params = sampling_params(req, limit, logprobs, constraint)
    return ChatPlan(ids, params, toolset, req.parallel_tool_calls, logprobs is not None)
