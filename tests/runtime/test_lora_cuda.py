"""The CUDA backend serving a LoRA adapter, against the CPU backend serving the same adapter on
the same GGUF: on the kernel emulator in the default run, on the GPU with `pytest -m gpu`.
Unmerged, the low-rank product runs in kernels/lora.cu (backends/cuda/lora.py); merged at load
(runtime/lora_merge.py), the adapted tensors are Q8_0 blocks read by the base's own kernels, and
the CPU reference is given the same Q8_0 merge (its float32 mode would merge into F32).
Adapters on some projections only (q, v, o, gate/up, down) exercise the zero parts of a fused
linear and a fused linear of merged and base parts; decode steps replay captured graphs.

In f32 (f32 KV cache and GEMMs) both backends compute the same sums in another order: logits
within 1e-4 of their scale and the same greedy tokens. At the default precision (f16 KV, f16
tensor-core and int8-activation matvecs for the base) the logits agree within 2% of their
scale, as the base alone does (test_cuda_engine.py's teacher-forced check)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from dev.cuda import emulator
from runtime.backends.cpu import CPUOps
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
from tests.runtime.lora_fixtures import make_adapter
from tests.runtime.test_cuda_emulated import engine_ops

PROMPT = "What is 2+2? The quick brown fox jumps over the lazy dog."
SOME = ["q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module")
def adapted(tiny_gguf):
    """(GGUF, adapter folder) for qwen2 and llama in Q8_0, the adapter beside the model."""
    out = {}
    for arch in ("qwen2", "llama"):
        path = tiny_gguf(arch, Q.Q8_0)
        folder = Path(path).parent / f"lora-cuda-{arch}"
        if not folder.exists():
            make_adapter(path, folder, seed=3, target_modules=SOME)
        out[arch] = (path, str(folder))
    return out


def compare(path: str, folder: str, tokenizer_cache: str, make_ops, f32: bool, mode: str = "unmerged"):
    config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache, lora=folder,
                          lora_mode=mode)
    ops, reference = make_ops(), CPUOps()
    reference.merge_qtype = ops.merge_qtype
    cpu, gpu = LLMEngine.from_gguf(config, ops=reference), LLMEngine.from_gguf(config, ops=ops)
    if mode == "merged":        # no low-rank kernels left: the adapter is in the weights
        assert all(f is None for layer in gpu.model.layers for f in layer.lora.values())
    base = LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache))
    ids = cpu.tokenizer.encode(PROMPT)
    ref, got = cpu.prompt_logits(ids), gpu.prompt_logits(ids)
    scale = np.abs(ref).max()
    assert np.abs(got - ref).max() <= (1e-4 if f32 else 2e-2) * scale
    assert np.abs(base.prompt_logits(ids) - ref).max() > 0.1 * scale, "the adapter must change the logits"
    params = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)
    if f32:
        want = cpu.generate([ids], params)[0].token_ids
        assert gpu.generate([ids, ids[:7]], params)[0].token_ids == want     # a decode batch of two
        assert gpu.ops.graphs.captured(decode=True)


@pytest.mark.skipif(not emulator.available(), reason="needs g++ and the CUDA headers")
@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("mode", ["merged", "unmerged"])
def test_lora_on_the_emulated_cuda_backend_matches_cpu(adapted, tokenizer_cache, arch, mode):
    compare(*adapted[arch], tokenizer_cache, lambda: engine_ops(kv_dtype="float32", gemm_dtype="float32"),
            f32=True, mode=mode)


@pytest.mark.skipif(not emulator.available(), reason="needs g++ and the CUDA headers")
def test_lora_at_default_precision_on_the_emulator(adapted, tokenizer_cache):
    compare(*adapted["llama"], tokenizer_cache, engine_ops, f32=False)


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("f32", [True, False])
@pytest.mark.parametrize("mode", ["merged", "unmerged"])
def test_lora_on_the_gpu_matches_cpu(adapted, tokenizer_cache, arch, f32, mode):
    from runtime.backends.cuda import CUDAOps
    kw = dict(kv_dtype="float32", gemm_dtype="float32") if f32 else {}
    compare(*adapted[arch], tokenizer_cache, lambda: CUDAOps(**kw), f32=f32, mode=mode)
