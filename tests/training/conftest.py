"""Training tests: tiny random models from dev/synthetic.py (tests/conftest.py's tiny_gguf, and
its torch on one thread) and a small preference set over the words those models' tokenizer knows."""
from __future__ import annotations

import json

import pytest

PAIRS = [
    {"prompt": "What is 2+2?", "chosen": " The answer is 4.", "rejected": " Hello world."},
    {"prompt": "The weather in Paris?", "chosen": " It is sunny today.", "rejected": " SELECT * FROM notes."},
    {"prompt": "Store the facts", "chosen": " in the database.", "rejected": " over the lazy dog."},
    {"prompt": "def main():", "chosen": " return 0", "rejected": " The quick brown fox."},
]


@pytest.fixture
def pairs_jsonl() -> str:
    return "".join(json.dumps(p) + "\n" for p in PAIRS)
