"""What hostile requests cost the services: a 50 MB prompt (declared, and chunked) against the
runtime, an 80 MB body against the worker (its limit is the 50 MB upload limit plus framing),
the largest prompt the runtime's 4 MiB limit lets through (tokenized, then refused as too long), and `SELECT zeroblob(500000000)` against the worker. Records the time
to the refusal, how many bytes the client had sent by then, the response size, and the
server's peak RSS (VmHWM) before and after.

    PYTHONPATH=$PWD python benchmarks/hardening.py     # tiny random model, CPU; ~1 minute
"""
from __future__ import annotations

import json
import os
import platform
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.provenance import ROOT, commit
from dev.synthetic import Shape, write_random_gguf

MB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start(args: list[str], port: int, home: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "samevm", "--home", str(home), *args, "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"{args[0]} did not start")


def refusal(port: int, path: str, body: bytes, chunked: bool) -> dict:
    """Stream `body` in 1 MiB pieces until the server answers; time to the status line."""
    te = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{te}\r\n\r\n".encode()
    sent, answer = 0, b""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=300) as s:
        s.sendall(head)
        while b"\r\n" not in answer and time.perf_counter() - started < 300:
            if sent < len(body):
                piece = body[sent:sent + MB]
                try:
                    s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                except (BrokenPipeError, ConnectionResetError):
                    sent = len(body)
                sent += len(piece)
            if select.select([s], [], [], 0 if sent < len(body) else 1)[0]:
                answer += s.recv(65536) or b"\r\n(closed)"
    return {"status": answer.split(b"\r\n")[0].decode(errors="replace"),
            "seconds": round(time.perf_counter() - started, 3), "sent_mb": round(min(sent, len(body)) / MB, 1)}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        model = write_random_gguf(home / "tiny.gguf", "qwen2", Shape())
        prompt = json.dumps({"model": "tiny", "prompt": "word " * (10 * MB)}).encode()       # 50 MB
        results = {}
        for name, args, path in (("runtime", ["serve", "--model", str(model), "--backend", "cpu"], "/v1/completions"),
                                 ("worker", ["worker"], "/v1/embeddings")):
            port = free_port()
            proc = start(args, port, home / name)
            try:
                before = peak_rss_mb(proc.pid)
                body = prompt if name == "runtime" else json.dumps({"input": "word " * (16 * MB)}).encode()
                row = {"body_mb": round(len(body) / MB, 1),
                       "declared": refusal(port, path, body, chunked=False),
                       "chunked": refusal(port, path, body, chunked=True)}
                if name == "runtime":       # the largest prompt the limit lets through is tokenized, then refused
                    big = json.dumps({"model": "tiny", "prompt": "word " * (4 * MB // 5 - 20)}).encode()
                    t = time.perf_counter()
                    r = httpx.post(f"http://127.0.0.1:{port}{path}", content=big, timeout=300,
                                   headers={"content-type": "application/json"})
                    row["largest_allowed_prompt"] = {"body_mb": round(len(big) / MB, 2), "status": r.status_code,
                                                     "code": r.json()["error"]["code"],
                                                     "seconds": round(time.perf_counter() - t, 3)}
                if name == "worker":
                    url = f"http://127.0.0.1:{port}/v1/sql"
                    httpx.post(url + "/exec", json={"db": "b", "sql": "CREATE TABLE t (x)"}, timeout=60)
                    t = time.perf_counter()
                    r = httpx.post(url + "/query", json={"db": "b", "sql": "SELECT zeroblob(500000000)"}, timeout=300)
                    row["zeroblob_500mb"] = {"status": r.status_code, "seconds": round(time.perf_counter() - t, 3),
                                             "response_bytes": len(r.content)}
                row["peak_rss_mb"] = {"before": round(before, 1), "after": round(peak_rss_mb(proc.pid), 1)}
                results[name] = row
            finally:
                proc.terminate()
                proc.wait(30)
    out = {"benchmark": "hardening", "commit": commit(), "python": platform.python_version(),
           "machine": platform.machine(), "cpus": os.cpu_count(), "results": results}
    target = ROOT / "benchmarks" / "results" / "hardening.json"
    target.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
