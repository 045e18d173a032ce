"""Server capacity benchmark: how many streaming connections `deepinfer serve` holds at once
without errors, and the server's own CPU cost per streamed token (network, request-worker and
output-pump threads, i.e. everything outside the engine step), from per-thread CPU time in /proc.

Usage: python3 bench/server/stream_capacity.py --model DIR [--connections 2000] [--max-tokens 16]
       [--max-num-seqs 2048] [--binary build/deepinfer]
Prints one JSON object. Only loopback is used; every loop is bounded and the server is stopped.
"""
import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import time


def thread_cpu_seconds(pid):
    """CPU seconds per thread name, summed ('di-http', 'di-pump', 'deepinfer' for the rest)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return out


async def stream_one(port, i, max_tokens, state):
    body = json.dumps({"model": "m", "prompt": f"stream {i}: tell me something", "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True}).encode()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        state["open"] += 1
        state["peak_open"] = max(state["peak_open"], state["open"])
        status = (await reader.readline()).split()[1]
        if status != b"200":
            raise RuntimeError(f"status {status}")
        started = False
        chunks = 0
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout=600)
            if not line:
                raise RuntimeError("closed early")
            if line.startswith(b"data: "):
                if line.startswith(b"data: [DONE]"):
                    break
                chunks += 1
                if not started:
                    started = True
                    state["streaming"] += 1
                    state["peak_streaming"] = max(state["peak_streaming"], state["streaming"])
        if started:
            state["streaming"] -= 1
        state["ok"] += 1
        writer.close()
    except Exception as e:  # counted, reported
        state["errors"][type(e).__name__ + ": " + str(e)[:80]] = state["errors"].get(type(e).__name__ + ": " + str(e)[:80], 0) + 1
    finally:
        state["open"] -= 1


async def run_clients(port, n, max_tokens):
    state = {"open": 0, "peak_open": 0, "streaming": 0, "peak_streaming": 0, "ok": 0, "errors": {}}
    await asyncio.gather(*(stream_one(port, i, max_tokens, state) for i in range(n)))
    return state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--binary", default="build/deepinfer")
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--max-num-seqs", type=int, default=2048)
    args = ap.parse_args()

    server = subprocess.Popen([args.binary, "serve", "--model", args.model, "--port", "0", "--served-model-name", "m",
                               "--max-num-seqs", str(args.max_num_seqs), "--max-queued-requests", "100000",
                               "--max-num-batched-tokens", "8192", "--kv-cache-memory", str(1 << 30)],
                              stderr=subprocess.PIPE, text=True)
    port = None
    for _ in range(100):
        line = server.stderr.readline()
        m = re.search(r"listening on http://[\d.]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready" in line:
            break
    assert port, "server did not start"
    before = thread_cpu_seconds(server.pid)
    t0 = time.time()
    state = asyncio.run(run_clients(port, args.connections, args.max_tokens))
    wall = time.time() - t0
    after = thread_cpu_seconds(server.pid)
    server.send_signal(signal.SIGTERM)
    exit_code = server.wait(timeout=120)

    cpu = {k: round(after.get(k, 0) - before.get(k, 0), 3) for k in after}
    tokens = state["ok"] * args.max_tokens
    server_cpu = cpu.get("di-http", 0) + cpu.get("di-pump", 0) + cpu.get("di-request", 0)
    print(json.dumps({
        "connections": args.connections, "completed": state["ok"], "errors": state["errors"],
        "peak_open_connections": state["peak_open"], "peak_streaming_at_once": state["peak_streaming"],
        "tokens_streamed": tokens, "wall_seconds": round(wall, 2), "thread_cpu_seconds": cpu,
        "server_cpu_us_per_token": round(1e6 * server_cpu / max(tokens, 1), 2),
        "engine_cpu_us_per_token": round(1e6 * (sum(cpu.values()) - server_cpu) / max(tokens, 1), 2),
        "server_exit_code": exit_code}))


if __name__ == "__main__":
    main()
