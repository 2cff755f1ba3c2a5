"""Concurrent submits with API tokens on loopback: N clients (threads, each its own HTTP
connection and user token) submit M jobs in all through the real app, store and loop (the
executor accepts launches in-process: no Ray), on SQLite and on a throwaway PostgreSQL.

    .venv/bin/python bench/concurrent_submits.py [--submits 1000] [--clients 16]

Prints errors and the p50 / p99 / max submit latency per store. Bounded: M requests, then stop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.control_loop import _serve, request  # noqa: E402


def run(db_url: str, submits: int, clients: int) -> dict:
    from frenzy.cli.client import ApiError, Client
    from frenzy.control import auth

    with tempfile.TemporaryDirectory() as tmp:  # tokens required, as beyond loopback
        first, store, stop = _serve(tmp, loop_running=True, db_url=db_url, auth=auth.AuthSettings.for_host("0.0.0.0"))
        url = first.url
        tokens = [auth.create_token(store, f"user{i}")[1] for i in range(clients)]
        latencies, errors, lock = [], [], threading.Lock()
        body = request(0).to_json()

        def client_loop(index: int) -> None:
            client = Client(url, token=tokens[index])
            for _ in range(index, submits, clients):
                began = time.perf_counter()
                try:
                    client.submit(body)
                except ApiError as exc:
                    with lock:
                        errors.append(str(exc)[:200])
                    continue
                with lock:
                    latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - began
        stop()
    latencies.sort()
    return {"ok": len(latencies), "errors": len(errors), "first_error": errors[0] if errors else "",
            "p50_ms": 1000 * statistics.median(latencies or [0]), "p99_ms": 1000 * (latencies or [0])[int(0.99 * max(0, len(latencies) - 1))],
            "max_ms": 1000 * (latencies or [0])[-1], "per_s": len(latencies) / wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submits", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    from tests.postgres import Unavailable, local_postgres

    with tempfile.TemporaryDirectory() as tmp:
        results = {"SQLite (WAL)": run(f"sqlite:///{tmp}/f.db", args.submits, args.clients)}
    try:
        with local_postgres(port=5545) as url:
            results["PostgreSQL"] = run(url, args.submits, args.clients)
    except Unavailable as exc:
        print(f"PostgreSQL skipped: {exc}")
    print(f"{args.submits} submits from {args.clients} clients with tokens (loopback, each submit plans the job)")
    print("| store | accepted | errors | p50 ms | p99 ms | max ms | submits/s |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['ok']} | {r['errors']} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['max_ms']:.0f} "
              f"| {r['per_s']:.1f} |" + (f" first error: {r['first_error']}" if r["errors"] else ""))


if __name__ == "__main__":
    main()
