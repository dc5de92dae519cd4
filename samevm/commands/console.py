"""samevm console [--host 127.0.0.1] [--port 8084]: serve the web console for the stack's
runtime and worker (`samevm up` starts it too). Loopback by default; any other host needs
an API key, which the page then asks for."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("console", help="serve the web console (chat, documents, data, jobs, suites, metrics)")
    p.add_argument("--host", default=None, help="address to bind (default: the settings' host, 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default 8084)")
    p.add_argument("--api-key", default=None, help="required when the host is not loopback")
    p.add_argument("--allow-host", action="append", default=None, metavar="NAME",
                   help="a Host name the console answers to besides loopback and --host (repeatable)")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    import uvicorn

    from console.app import create_app
    from console.config import ConsoleConfig

    config = ConsoleConfig.from_settings(settings, host=args.host, port=args.port, api_key=args.api_key,
                                         allowed_hosts=tuple(args.allow_host) if args.allow_host else None)
    print(f"samevm console on http://{config.host}:{config.port}/ "
          f"(runtime {config.runtime_url}, worker {config.worker_url})", flush=True)
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level="warning")
    return 0
