"""samevm chat "PROMPT": answer one chat prompt through the engine, in this process."""
from __future__ import annotations

import sys

from runtime import catalog
from runtime.config import EngineConfig
from runtime.sampling import SamplingParams


def register(sub) -> None:
    p = sub.add_parser("chat", help="answer one prompt with the local model (no server)")
    p.add_argument("prompt")
    p.add_argument("--model", help="known model name or GGUF path")
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"])
    p.add_argument("--cpu-dtype", choices=["int8", "bfloat16", "float32"],
                   help="CPU weights (default: the settings' cpu_dtype, int8; float32 is the reference)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0)
    p.set_defaults(func=run)


def run(args, settings) -> int:
    from runtime.engine.llm_engine import LLMEngine   # torch: seconds to import, only this command needs it

    name = args.model or settings.model
    path = catalog.resolve(name, settings.home)
    lora = catalog.adapter_for(name, settings.lora, settings.digest_cache)
    engine = LLMEngine.from_gguf(EngineConfig(model=str(path), lora=lora,
                                              backend=args.backend or settings.backend,
                                              cpu_dtype=args.cpu_dtype or settings.cpu_dtype,
                                              tokenizer_cache=str(settings.tokenizer_cache), kv_cache_mb=256,
                                              kernel_cache=str(settings.kernel_cache),
                                              merge_cache=str(settings.merge_cache),
                                              cuda=settings.cuda_options()))
    prompt = engine.tokenizer.render_chat([{"role": "user", "content": args.prompt}])
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature)
    seq = engine.add_request(prompt, params)
    while not seq.is_finished:
        for out in engine.step():
            if out.seq is seq:
                sys.stdout.write(out.text)
                sys.stdout.flush()
    a = seq.awareness.summary()
    on = engine.ops.name + (f" {engine.ops.weights}" if hasattr(engine.ops, "weights") else "")
    print(f"\n[{engine.spec.name} on {on}, {seq.num_output} tokens, "
          f"mean log-prob {a['mean_logprob']:.3f}, finish {seq.finish_reason}]", file=sys.stderr)
    return 0
