"""Batch-1 decode of two source trees on one GGUF, alternating old, new, old, new in one run:
a behaviour-unchanged check for a refactor (not a claim against a peer). Each run is
benchmarks/decode_samevm.run in a fresh process of that tree (step time through
engine.step(), the CUDA graph's GPU time, the synchronous step, prefill of 128 tokens).

    git archive OLD | tar x -C /tmp/old
    python benchmarks/decode_ab.py MODEL.gguf /tmp/old . benchmarks/results/decode-ab.json
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CODE = ("import json,sys; from pathlib import Path; from benchmarks.decode_samevm import run; "
        "r=run(Path(sys.argv[1]),[1],128,256,[128],sys.argv[2],int(sys.argv[3])); "
        "print('RESULT', json.dumps({'b1': r['decode'][1], 'sync_b1': r['sync_b1'], 'prefill128': r['prefill'][128]}))")


def main(model: str, old: str, new: str, out: str, vocab: int = 151936) -> None:
    rows = []
    for tree in (old, new, old, new):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.abspath(tree),
                                                                         os.environ.get("PYTHONPATH")]))}
        p = subprocess.run([sys.executable, "-c", CODE, model, "/tmp/samevm-ab-tokenizers", str(vocab)],
                           cwd=tree, env=env, capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT")]
        if not line:
            raise RuntimeError(f"{tree} failed:\n{p.stderr[-3000:]}")
        row = {"tree": "old" if tree == old else "new", **json.loads(line[0][7:])}
        rows.append(row)
        print(row["tree"], f"b1 {row['b1']['decode_tok_s']:.0f} tok/s, step {row['b1']['step_ms']:.3f} ms, "
              f"graph {row['b1']['graph_gpu_ms'] or 0:.3f} ms", flush=True)
    Path(out).write_text(json.dumps({"model": model, "runs": rows}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:5])
