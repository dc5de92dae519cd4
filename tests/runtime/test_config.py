"""CudaOptions: built once from the CLI and the settings, validated there, carried by
EngineConfig to the CUDA backend (which a machine without a GPU cannot build: the options
it receives are checked on the emulator in test_cuda_emulated.py)."""
from __future__ import annotations

import pytest

from runtime.config import CudaOptions, EngineConfig
from samevm.cli import build_parser
from samevm.commands.serve import build_config
from samevm.settings import Settings


def test_cli_options_over_settings_reach_the_engine_config(tiny_gguf, tmp_path, monkeypatch):
    monkeypatch.setenv("SAMEVM_CUDA", "pdl=false,kv_dtype=bfloat16,matvec_split=4")
    args = build_parser().parse_args(["serve", "--model", str(tiny_gguf("qwen2")),
                                      "--cuda", "kv_dtype=float32", "--cuda", "graphs=off"])
    engine = build_config(args, Settings(home=tmp_path)).engine
    assert engine.cuda == CudaOptions(pdl=False, kv_dtype="float32", graphs=False, matvec_split=4)


def test_defaults_are_what_serves():
    assert EngineConfig(model="m.gguf").cuda == CudaOptions()
    o = CudaOptions()
    assert (o.kv_dtype, o.gemm_dtype, o.pdl, o.stage_weights, o.attention_tc, o.matvec_split) == \
        ("float16", "float16", True, True, True, None)


@pytest.mark.parametrize("items, words", [
    (["kv_dtype=float8"], "kv_dtype"), (["graphs=maybe"], "true or false"), (["matvec_split=3"], "matvec_split"),
    (["warps=8"], "unknown CUDA option"), (["pdl"], "NAME=VALUE"), (["matvec_unroll=two"], "integer")])
def test_bad_options_are_refused_where_they_are_built(items, words):
    with pytest.raises(ValueError, match=words):
        CudaOptions.parse(items)
