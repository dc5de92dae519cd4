"""Request bodies of the OpenAI-compatible API, validated where they enter.

Unknown top-level fields are refused (400, `unknown_parameter`), as OpenAI does. A few
fields that do not change what a local model generates are accepted and ignored: OpenAI's
`user`, `metadata`, `store`, `service_tier`, `reasoning_effort`, `prompt_cache_key`,
`safety_identifier`, and Ollama's `think` and `options`, which Hermes agent sends to
custom OpenAI-compatible endpoints. Messages tolerate extra keys, because clients often send back the
assistant message object they received (with `refusal: null`, `annotations`, ...).

samevm extensions: `top_k`, `min_p`, `repetition_penalty`, `ignore_eos` (generate exactly
max_tokens, for benchmarks), and `structured_outputs` ({"regex": ...} or {"grammar":
<Lark>}) to constrain the output beyond JSON.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Every number has bounds here, where it enters: an unbounded int would overflow the int32
# arrays of the sampling batch or of a token list inside an engine step that other requests share.
INT32_MAX = 2**31 - 1
Count = Annotated[int, Field(ge=-INT32_MAX, le=INT32_MAX)]      # the route says what is too small
TokenId = Annotated[int, Field(ge=0, le=INT32_MAX)]
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]
Seed = Annotated[int, Field(ge=-(2**63), le=2**64 - 1)]
StopField = str | Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=16)] | None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


# ---- chat messages --------------------------------------------------------------------
class TextPart(Loose):
    type: Literal["text"]
    text: str


class FunctionCall(Loose):
    name: str
    arguments: str | dict = "{}"


class AssistantToolCall(Loose):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(Loose):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[AssistantToolCall] | None = None
    tool_call_id: str | None = None


# ---- tools and formats ----------------------------------------------------------------
class FunctionDef(Strict):
    name: str
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None


class Tool(Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(Strict):
    name: str


class NamedToolChoice(Strict):
    type: Literal["function"]
    function: NamedFunction


class JSONSchemaFormat(Strict):
    name: str = "response"
    description: str | None = None
    schema_: dict = Field(default_factory=lambda: {"type": "object"}, alias="schema")
    strict: bool | None = None


class ResponseFormat(Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_present(self):
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format of type json_schema needs a json_schema")
        return self


class StructuredOutputs(Strict):
    regex: str | None = None
    grammar: str | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.regex is None) == (self.grammar is None):
            raise ValueError("structured_outputs takes exactly one of regex, grammar")
        return self


class StreamOptions(Strict):
    include_usage: bool = False
    include_obfuscation: bool | None = None


# ---- requests ---------------------------------------------------------------------------
class SamplingFields(Strict):
    """Fields shared by chat and text completions."""
    model: str
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Annotated[int, Field(ge=1, le=1)] = 1
    temperature: Temperature | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    top_k: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0.0, le=10.0)] | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    seed: Seed | None = None
    stop: StopField = None
    logit_bias: dict[str, float] | None = None
    ignore_eos: bool = False
    structured_outputs: StructuredOutputs | None = None
    # accepted and ignored: they do not change what a local model generates
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None


class ChatCompletionRequest(SamplingFields):
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: Count | None = None
    max_completion_tokens: Count | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True
    response_format: ResponseFormat | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    reasoning_effort: str | None = None
    modalities: list[Literal["text"]] | None = None
    # sent by Hermes agent's "custom" provider (Ollama's flags); nothing to do for our models
    think: bool | None = None
    options: dict | None = None


class CompletionRequest(SamplingFields):
    prompt: str | Annotated[list[TokenId], Field(min_length=1)] | Annotated[list[str], Field(min_length=1, max_length=1)] \
        | Annotated[list[Annotated[list[TokenId], Field(min_length=1)]], Field(min_length=1, max_length=1)]
    max_tokens: Count | None = 16
    logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    echo: Literal[False] = False
    best_of: Annotated[int, Field(ge=1, le=1)] | None = None
    suffix: None = None


class TokenizeRequest(Strict):
    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    tools: list[Tool] | None = None
    add_generation_prompt: bool = True
    add_special_tokens: bool = True

    @model_validator(mode="after")
    def _one(self):
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt, messages")
        return self


class DetokenizeRequest(Strict):
    model: str | None = None
    tokens: list[TokenId]


class ReloadRequest(Strict):
    path: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00-\x1f]*$")] | None = None  # None: the live GGUF
    adapter: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00-\x1f]*$")] | None = None  # LoRA folder
    revision: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:+-]+$")] | None = None
