"""runtime/lora.py reads an adapter's safetensors with numpy: the same float32 values torch's
reader gives (the reference), float16 (the shipped adapter's dtype) and bfloat16 included, without
importing torch (1-3 s of a start)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from runtime.lora import WEIGHTS_FILE, AdapterError, read_tensors
from tests.runtime.lora_fixtures import make_adapter

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "runtime" / "adapters" / "qwen2.5-coder-0.5b-tools" / WEIGHTS_FILE


@pytest.fixture(scope="module")
def adapter(tiny_gguf, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("adapters") / "lora"
    make_adapter(tiny_gguf("qwen2"), folder, seed=4)
    return folder


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_each_dtype_reads_as_torch_reads_it(adapter, tmp_path, dtype):
    tensors = {k: v.to(dtype) for k, v in load_file(adapter / WEIGHTS_FILE).items()}
    save_file(tensors, tmp_path / WEIGHTS_FILE)
    ours = read_tensors(tmp_path / WEIGHTS_FILE)
    assert ours.keys() == tensors.keys()
    for k, v in tensors.items():
        want = v.float().numpy()
        assert ours[k].dtype == np.float32 and np.array_equal(ours[k], want), k


def test_the_shipped_float16_adapter_reads_as_torch_reads_it():
    ours = read_tensors(SHIPPED)
    want = load_file(SHIPPED)
    assert {str(v.dtype) for v in want.values()} == {"torch.float16"}
    assert all(np.array_equal(ours[k], v.float().numpy()) for k, v in want.items())


def test_a_dtype_numpy_cannot_hold_is_refused(adapter, tmp_path):
    save_file({k: v.to(torch.float8_e4m3fn) for k, v in load_file(adapter / WEIGHTS_FILE).items()},
              tmp_path / WEIGHTS_FILE)
    with pytest.raises(AdapterError, match="F8_E4M3"):
        read_tensors(tmp_path / WEIGHTS_FILE)


def test_loading_an_adapter_imports_no_torch(adapter, tiny_gguf):
    code = (f"import json, sys\nfrom runtime.gguf import load_gguf\nfrom runtime.lora import load_adapter\n"
            f"a = load_adapter({str(adapter)!r}, load_gguf({tiny_gguf('qwen2')!r}).spec)\n"
            f"print(json.dumps({{'rank': a.rank, 'torch': 'torch' in sys.modules}}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"rank": 8, "torch": False}
