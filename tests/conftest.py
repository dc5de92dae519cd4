"""Shared fixtures: tiny random-weight GGUF models of each architecture, built at test time."""
from __future__ import annotations

import os

import pytest
import torch
from gguf import GGMLQuantizationType as Q
from threadpoolctl import threadpool_limits

from dev.synthetic import TINY_QWEN3, Shape, write_random_gguf

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# torch and numpy's BLAS on one thread in the test process, as the servers the tests start get
# (OMP_NUM_THREADS=1): with the other of 2 cores busy, their spinning threads made the tiny
# models' CPU engines 10x slower (test_engine.py's batching test: 41 s on two threads, 4 s on one).
torch.set_num_threads(1)
threadpool_limits(1, user_api="blas")

ARCHS = ("qwen2", "qwen3", "llama")
KQUANT_SHAPE = Shape(hidden=256, ffn=512, heads=2, kv_heads=1, head_dim=128)  # K-quant rows: multiples of 256


def default_shape(arch: str) -> Shape:
    return TINY_QWEN3 if arch == "qwen3" else Shape()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    """tiny_gguf(arch, qtype=Q.F32, shape=None, **kw) -> path of a cached random model."""
    root = tmp_path_factory.mktemp("models")
    made: dict[tuple, str] = {}

    def make(arch: str = "qwen2", qtype: Q = Q.F32, shape: Shape | None = None, **kw):
        shape = shape or default_shape(arch)
        key = (arch, qtype, shape, tuple(sorted(kw.items())))
        if key not in made:
            path = root / f"{arch}-{qtype.name}-{len(made)}.gguf"
            made[key] = str(write_random_gguf(path, arch, shape, qtype, **kw))
        return made[key]

    return make


@pytest.fixture(scope="session")
def tokenizer_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tokenizers"))


def pytest_collection_modifyitems(config, items):
    from runtime.backends import cuda_available
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
