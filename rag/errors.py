"""The two ways retrieval refuses input; the worker maps them to 400 and 404."""


class InputError(ValueError):
    """The caller's input cannot be used (bad path, broken PDF, empty text ...)."""


class NotFoundError(LookupError):
    """A named thing (collection, document) does not exist."""


class UpstreamError(RuntimeError):
    """A service retrieval depends on (the samevm runtime, for llm rerank) failed or is down."""
