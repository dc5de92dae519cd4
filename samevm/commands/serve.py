"""samevm serve: the runtime's OpenAI-compatible HTTP server (runtime/server)."""
from __future__ import annotations

import sys
from pathlib import Path

from runtime import catalog
from runtime.config import EngineConfig
from runtime.gguf import ModelLoadError
from runtime.lora import AdapterError
from runtime.server.config import ServerConfig
from runtime.server.model_digest import hash_ahead
from samevm import collector


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve the model over an OpenAI-compatible HTTP API")
    p.add_argument("--model", help="known model name or GGUF path (default: the settings' model)")
    p.add_argument("--host", help="address to bind (default 127.0.0.1; off loopback needs --api-key)")
    p.add_argument("--port", type=int, help="port (default: the settings' runtime_port, 8081)")
    p.add_argument("--api-key", help="require `Authorization: Bearer KEY` (default $SAMEVM_API_KEY)")
    p.add_argument("--allowed-host", action="append", metavar="NAME",
                   help="a Host name to answer to besides loopback and --host (repeatable; '*' for any)")
    p.add_argument("--lora", metavar="DIR",
                   help="a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) to serve "
                        "on the model; 'auto': the adapter shipped with a known model, 'none': the base "
                        "(default: the settings' lora, $SAMEVM_LORA, auto)")
    p.add_argument("--lora-mode", choices=["merged", "unmerged"], default="merged",
                   help="merge the adapter into the weights at load (default: decode at the base's speed) or "
                        "apply it unmerged (loads and hot-swaps faster, decodes slower)")
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"])
    p.add_argument("--cpu-dtype", choices=["int8", "bfloat16", "float32"],
                   help="CPU weights (default: the settings' cpu_dtype, int8; float32 is the reference)")
    p.add_argument("--max-model-len", type=int, default=0, help="context length (0: the model's, capped)")
    p.add_argument("--kv-cache-mb", type=int, default=1024)
    p.add_argument("--max-num-seqs", type=int, default=32)
    p.add_argument("--cuda", action="append", metavar="NAME=VALUE",
                   help="a CUDA backend option (runtime/config.py CudaOptions), e.g. kv_dtype=bfloat16; "
                        "repeatable, over the settings' SAMEVM_CUDA")
    p.add_argument("--reload-root", action="append", metavar="DIR",
                   help="a folder /admin/reload may load from, besides the model's own and the data "
                        "directory's models and revisions (repeatable)")
    p.add_argument("--no-resume", action="store_true",
                   help="serve --model even if a reload made another revision active")
    p.set_defaults(func=run)


def build_config(args, settings) -> ServerConfig:
    name = args.model or settings.model
    path = catalog.resolve(name, settings.home)
    model_id = name if name in catalog.KNOWN_MODELS else Path(path).stem
    lora = catalog.adapter_for(name, args.lora or settings.lora, settings.digest_cache)
    engine = EngineConfig(model=str(path), lora=lora, lora_mode=args.lora_mode,
                          backend=args.backend or settings.backend,
                          cpu_dtype=args.cpu_dtype or settings.cpu_dtype,
                          max_model_len=args.max_model_len, kv_cache_mb=args.kv_cache_mb,
                          max_num_seqs=args.max_num_seqs, tokenizer_cache=str(settings.tokenizer_cache),
                          kernel_cache=str(settings.kernel_cache), merge_cache=str(settings.merge_cache),
                          cuda=settings.cuda_options(args.cuda))
    return ServerConfig(engine=engine, model_id=model_id, home=settings.home,
                        host=args.host or settings.host, port=args.port or settings.runtime_port,
                        api_key=args.api_key or settings.api_key, resume=not args.no_resume,
                        allowed_hosts=tuple(args.allowed_host or settings.allowed_hosts),
                        reload_roots=tuple(Path(d) for d in args.reload_root or ()))


def run(args, settings) -> int:
    collector.pause()               # until the first load is over (samevm/collector.py)
    try:
        config = build_config(args, settings)
    except ModelLoadError as e:
        print(f"samevm serve: {e}", file=sys.stderr)
        return 2
    hash_ahead(config)              # beside the imports below, which hold the GIL while hashing does not
    from runtime.engine.llm_engine import read_files
    held = []                       # the files read here, handed to the first load and then let go
    try:                            # a bad adapter refused now, not as a 503 on /health after the load
        held.append(read_files(config.engine))
    except AdapterError as e:
        print(f"samevm serve: cannot serve --lora {config.engine.lora}: {e}", file=sys.stderr)
        return 2
    except ModelLoadError:
        held.append(None)           # the load says what is wrong with the model file, on /health
    import uvicorn

    from runtime.server.app import create_app
    collector.imports_done()

    print(f"samevm serve: {config.model_id} on http://{config.host}:{config.port}/v1 "
          f"(health: /health answers 503 until the model has loaded)", flush=True)
    app = create_app(config, lambda state: first_load(state, held.pop()))      # (the adapter: 18 MB for the 0.5B)
    uvicorn.run(app, host=config.host, port=config.port, log_level="info",
                timeout_graceful_shutdown=5, ws="none")     # no websocket routes: nor its imports at start
    return 0


def first_load(state, files) -> None:
    """loading.start with `files` (read by run's check); then the collector is back on."""
    from runtime.server import loading
    try:
        loading.start(state, files)
    finally:
        collector.resume()
