"""An external hop for benchmarks/routing.py: a separate local HTTP proxy process that
forwards every request to --target after adding the delay, stalls and failures of a
network path between services on different machines.

Per request, with its own seeded random generator:
  - with probability --timeout-rate it stalls for --stall-s (longer than the client waits)
    and answers 504 without forwarding (the request was lost on the way);
  - else with probability --failure-rate it answers 503 without forwarding;
  - else it waits a delay drawn from a log-normal with median --latency-ms and spread
    --jitter (sigma), then forwards and relays the answer.

    python benchmarks/routing_proxy.py --target http://127.0.0.1:8082 --port 9000 \\
        --latency-ms 40 --jitter 0.5 --timeout-rate 0.03 --failure-rate 0.02
"""
from __future__ import annotations

import argparse
import math
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True, help="base URL requests are forwarded to")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--latency-ms", type=float, default=0.0, help="median added delay")
    p.add_argument("--jitter", type=float, default=0.0, help="log-normal sigma of the delay (0: fixed)")
    p.add_argument("--timeout-rate", type=float, default=0.0)
    p.add_argument("--failure-rate", type=float, default=0.0)
    p.add_argument("--stall-s", type=float, default=3.0, help="how long a timed-out request hangs")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def make_handler(args: argparse.Namespace):
    rng = random.Random(args.seed)
    lock = threading.Lock()
    client = httpx.Client(base_url=args.target, timeout=600)

    def draw() -> tuple[str, float]:
        with lock:
            r = rng.random()
            if r < args.timeout_rate:
                return "stall", args.stall_s
            if r < args.timeout_rate + args.failure_rate:
                return "fail", args.latency_ms / 1000
            noise = math.exp(rng.gauss(0.0, args.jitter)) if args.jitter else 1.0
            return "forward", args.latency_ms * noise / 1000

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self, status: int, body: bytes, headers: dict | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {"content-type": "application/json"}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            action, delay = draw()
            time.sleep(delay)
            if action == "stall":
                self._reply(504, b'{"error": {"message": "the external hop timed out"}}')
                return
            if action == "fail":
                self._reply(503, b'{"error": {"message": "the external hop is unavailable"}}')
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            r = client.request(self.command, self.path, content=body, headers=headers)
            self._reply(r.status_code, r.content,
                        {k: v for k, v in r.headers.items() if k.lower() not in HOP_HEADERS})

        do_GET = do_POST = do_DELETE = do_PUT = _handle

        def log_message(self, *a):
            pass

    return Handler


def main(argv=None) -> None:
    args = parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(args))
    server.daemon_threads = True
    print(f"routing proxy on http://{args.host}:{args.port} -> {args.target}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
