"""Training tests: tiny random models from dev/synthetic.py (tests/conftest.py's tiny_gguf),
a small preference set over the words those models' tokenizer knows, and torch on one
thread (on a shared 2-core machine, spinning OpenMP threads make tiny models far slower)."""
from __future__ import annotations

import json

import pytest
import torch

PAIRS = [
    {"prompt": "What is 2+2?", "chosen": " The answer is 4.", "rejected": " Hello world."},
    {"prompt": "The weather in Paris?", "chosen": " It is sunny today.", "rejected": " SELECT * FROM notes."},
    {"prompt": "Store the facts", "chosen": " in the database.", "rejected": " over the lazy dog."},
    {"prompt": "def main():", "chosen": " return 0", "rejected": " The quick brown fox."},
]


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def pairs_jsonl() -> str:
    return "".join(json.dumps(p) + "\n" for p in PAIRS)
