"""Hostile request bodies for the services' fuzz tests: a valid body per route, with one part
replaced by something no schema-driven generator sends (lone surrogates, NUL, integers past
64 bits, NaN and 1e308, 200 K-character strings, 5,000-item lists, 400-deep nesting, unknown
keys), sent with a Content-Length or chunked, over one keep-alive connection. Every answer
must be below 500 and come within the client's timeout."""
from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TIMEOUT_S = 120         # a hang, not a slow answer (a shared 2-core machine can stall a request for 30 s)


@dataclass(frozen=True)
class Target:
    method: str
    path: str
    body: dict | None = None


def _nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


SURROGATES = st.text(st.characters(categories=["Cs", "Ll", "Cc"]), min_size=1, max_size=8)
NASTY = st.one_of(
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "x\x00y", "\ud83d", "\ufeff\u202e", "", " ", "-1", "1e999"]),
    SURROGATES,
    st.integers(min_value=-2**100, max_value=2**100),
    st.sampled_from([2**31 - 1, 2**31, 2**32, 2**63, 2**64, -2**63 - 1, -1, 0, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, float("nan"), float("inf")]),
    st.sampled_from(["x" * 200_000, "\ud800" * 10_000, ["a"] * 5000, [2**40] * 5000, [[]] * 5000,
                     {f"k{i}": i for i in range(2000)}, _nested(400), _nested(60)]),
    st.lists(st.one_of(st.integers(), st.text(max_size=4), st.none()), max_size=6),
    st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=4)), max_size=3),
    st.none(), st.booleans(),
)


def _paths(value, prefix=()):
    """Every place inside a body that can be replaced, as a key path."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from _paths(v, prefix + (i,))


BAD_CHARS = st.sampled_from(["\ud800", "\udfff", "\x00", "\ud83d", "\ufffe", "\u202e", "\x1b[2J"])
BIG_INTS = st.one_of(st.integers(min_value=-2**100, max_value=2**100),
                     st.sampled_from([2**31 - 1, 2**31, 2**32, 2**63, 2**64, -2**63 - 1, -1, 0, 10**30]))
BAD_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from([1e308, -1e308, 5e-324, float("nan"), float("inf"), -0.0]))


def _like(draw, old):
    """A hostile value of the same JSON type as `old`: it passes type checks and reaches the code."""
    if isinstance(old, bool) or old is None or isinstance(old, dict):
        return draw(NASTY)
    if isinstance(old, str):
        bad = draw(BAD_CHARS)
        return draw(st.sampled_from([old + bad, bad + old, old[:1] + bad + old[1:], (old or "x") * 20_000,
                                     bad * 2000]))
    if isinstance(old, int):
        return draw(BIG_INTS)
    if isinstance(old, float):
        return draw(BAD_FLOATS)
    if isinstance(old, list):
        return draw(st.sampled_from([(old * 5000)[:5000], [], old + [draw(NASTY)], [old] * 3]))
    return draw(NASTY)


@st.composite
def hostile(draw, targets: list[Target]):
    t = draw(st.sampled_from(targets))
    body = copy.deepcopy(t.body)
    if body is not None:
        where = draw(st.sampled_from(list(_paths(body))))
        mode = draw(st.sampled_from(["like", "like", "like", "any", "key"]))
        if mode == "key":                          # an unknown key beside a known one
            where = where[:-1] + (draw(st.sampled_from(["x", "\ud800", "\x00", "n" * 1000])),)
        parent, old = None, body
        for k in where:
            parent, old = old, (old[k] if isinstance(old, (dict, list)) and k in (old if isinstance(old, dict)
                                                                                  else range(len(old))) else None)
        value = _like(draw, old) if mode == "like" else draw(NASTY)
        if not where:
            body = value
        elif isinstance(parent, dict) or (isinstance(parent, list) and isinstance(where[-1], int)):
            parent[where[-1]] = value
    raw = json.dumps(body).encode() if body is not None else b""
    return t, raw, draw(st.booleans())


def run(base_url: str, targets: list[Target], examples: int, headers: dict | None = None) -> dict[int, int]:
    """Send `examples` hostile requests; returns how often each status came back."""
    seen: dict[int, int] = {}
    slowest: dict[str, float] = {}
    with httpx.Client(base_url=base_url, timeout=TIMEOUT_S, headers=headers) as client:

        @given(case=hostile(targets))
        @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def one(case):
            t, raw, chunked = case
            content = iter([raw[:len(raw) // 2], raw[len(raw) // 2:]]) if chunked else raw
            kw = {} if t.body is None else {"content": content, "headers": {"content-type": "application/json"}}
            started = time.monotonic()
            try:
                r = client.request(t.method, t.path, **kw)
            except httpx.TimeoutException as e:
                raise AssertionError(f"no answer in {TIMEOUT_S} s: {t.method} {t.path} {raw[:300]!r}") from e
            assert r.status_code < 500, f"{r.status_code} on {t.method} {t.path} {raw[:300]!r}: {r.text[:500]}"
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            slowest[t.path] = max(slowest.get(t.path, 0.0), time.monotonic() - started)
        one()
    print("statuses", seen, "slowest answer by route (s)", {k: round(v, 2) for k, v in slowest.items()})
    return seen
