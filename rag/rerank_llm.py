"""The "llm" reranker: ask an OpenAI-compatible chat model (the samevm runtime) whether each
document answers the query, and score it by P(yes) of the first answer token.

One request per document, `max_tokens: 1, temperature: 0, logprobs: true,
top_logprobs: k`; P(yes) = sum of exp(logprob) over the top-k alternatives of the first
token whose text, stripped and lower-cased, is "yes" (0 when none is).

The runtime has no route that scores many prompts in one request (/v1/completions takes one
prompt), so all the candidates of a query are sent at once, as concurrent requests (up to
`parallel`, the runtime's default --max-num-seqs): its scheduler batches the waiting
prompts into the same forward passes (prefill of up to 2,048 tokens a step), and a prompt
that begins with the system prompt and the query shares those KV blocks through the prefix
cache once one of them is computed.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import httpx

from httpkit.client import client
from rag.errors import UpstreamError

SYSTEM = ("You judge search results. Answer with one word: yes if the document helps "
          "answer the query, no if it does not.")


def p_yes(response: dict) -> float:
    """P(yes) from an OpenAI chat completion made with logprobs and top_logprobs."""
    try:
        first = response["choices"][0]["logprobs"]["content"][0]
        alternatives = first.get("top_logprobs") or [first]
        return min(1.0, sum(math.exp(a["logprob"]) for a in alternatives
                            if a["token"].strip().lower() == "yes"))
    except (KeyError, IndexError, TypeError) as e:
        raise UpstreamError(f"the chat model's reply has no logprobs for its first token ({e!r}); "
                            "the llm reranker needs logprobs=true support") from e


class LlmReranker:
    name = "llm"

    def __init__(self, base_url: str, model: str | None, api_key: str | None = None,
                 top_logprobs: int = 10, max_doc_chars: int = 2000, timeout: float = 60.0,
                 parallel: int = 32):
        self.base_url, self.model = base_url.rstrip("/"), model
        self.top_logprobs, self.max_doc_chars, self.parallel = top_logprobs, max_doc_chars, parallel
        self.client = client(api_key=api_key, timeout=timeout)

    def _request(self, query: str, document: str) -> dict:
        user = f"Query: {query}\n\nDocument: {document[:self.max_doc_chars]}\n\nDoes the document help answer the query?"
        return {"model": self.model or self._served_model(), "temperature": 0, "max_tokens": 1, "logprobs": True,
                "top_logprobs": self.top_logprobs,
                "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]}

    def _served_model(self) -> str:
        """The first model the runtime lists, when none was configured."""
        try:
            r = self.client.get(f"{self.base_url}/v1/models")
            self.model = r.json()["data"][0]["id"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as e:
            raise UpstreamError(f"the runtime at {self.base_url} did not list a model ({type(e).__name__}: {e})") from e
        return self.model

    def _one(self, query: str, document: str) -> float:
        url = f"{self.base_url}/v1/chat/completions"
        try:
            r = self.client.post(url, json=self._request(query, document))
        except httpx.HTTPError as e:
            raise UpstreamError(f"the runtime at {self.base_url} did not answer ({type(e).__name__}: {e})") from e
        if r.status_code != 200:
            raise UpstreamError(f"the runtime at {self.base_url} answered {r.status_code}: {r.text[:300]}")
        return p_yes(r.json())

    def score(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        with ThreadPoolExecutor(min(self.parallel, len(documents))) as pool:
            return list(pool.map(lambda d: self._one(query, d), documents))
