"""The router's fault handling, with stub workers where a test must control a worker's answers
(pd_router_helpers.StubWorker) and real `deepinfer serve` workers where it kills one: the
prefill retry rule of the P/D contract, /health following the workers (a restarted one
rejoins), a decode worker killed mid-stream or cutting an event, a silent one timing out, and
backpressure towards a decode worker when the client reads slowly."""
import http.client
import json
import os
import signal
import socket
import time

import pytest

from pd_router_helpers import Router, StubWorker
from server import Server


@pytest.fixture
def stubs():
    made = []

    def make(name):
        made.append(StubWorker(name))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def test_prefill_failure_is_retried_on_another_prefill_worker_then_a_503(deepinfer_bin, stubs):
    p1, p2, d = stubs("p1"), stubs("p2"), stubs("d")
    r = Router(deepinfer_bin, [p1.url, p2.url], [d.url])
    try:
        # Every prefill fails: one retry, on the other prefill worker, then the client's 503.
        d.answers = ["retry"]
        status, body = r.post("/v1/completions", {"prompt": "x"})
        assert status == 503
        assert body["error"]["code"] == "prefill_unavailable" and "prefill" in body["error"]["message"]
        assert sorted(d.prefill_urls_seen()) == sorted([p1.url, p2.url])
        assert r.metric("deepinfer_router_prefill_retries_total") == 1
        assert r.metric("deepinfer_router_requests_total", endpoint="/v1/completions", outcome="prefill_failed") == 1

        # The retry succeeds: the client sees only the answer.
        d.requests.clear()
        d.answers = ["retry", "ok"]
        status, body = r.post("/v1/completions", {"prompt": "x"})
        assert status == 200 and body["choices"][0]["text"] == "d"
        first, second = d.prefill_urls_seen()
        assert first != second and {first, second} <= {p1.url, p2.url}

        # With one prefill worker left there is nothing to retry on.
        p2.healthy = False
        deadline = time.time() + 30
        while r.metric("deepinfer_router_worker_healthy", role="prefill", url=p2.url) != 0:
            assert time.time() < deadline
            time.sleep(0.05)
        d.requests.clear()
        d.answers = ["retry"]
        assert r.post("/v1/completions", {"prompt": "x"})[0] == 503
        assert d.prefill_urls_seen() == [p1.url]

        # No prefill worker at all: requests still go to decode, without the header.
        p1.healthy = False
        r.wait_health(503)
        d.requests.clear()
        d.answers = ["ok"]
        assert r.post("/v1/completions", {"prompt": "x"})[0] == 200
        assert d.prefill_urls_seen() == [None]
        # The request reached the decode worker unchanged.
        assert json.loads(d.requests[0]["body"]) == {"prompt": "x"} and d.requests[0]["path"] == "/v1/completions"
    finally:
        assert r.stop() == 0


def test_same_prefix_same_prefill_worker(deepinfer_bin, stubs):
    prefill = [stubs(f"p{i}") for i in range(3)]
    d = stubs("d")
    r = Router(deepinfer_bin, [p.url for p in prefill], [d.url])
    try:
        system = "You are a helpful assistant. " * 40  # longer than the hashed prefix
        for i in range(12):
            body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": f"question {i}"}]}
            assert r.post("/v1/chat/completions", body)[0] == 200
        for i in range(12):
            assert r.post("/v1/completions", {"prompt": f"{i} unrelated prompt {i * 7919}"})[0] == 200
        seen = d.prefill_urls_seen()
        assert len(set(seen[:12])) == 1  # sharing a prefix: one prefill worker
        assert len(set(seen[12:])) > 1   # different prompts spread
    finally:
        assert r.stop() == 0


def test_health_follows_the_workers_and_a_restarted_worker_rejoins(deepinfer_bin, stubs):
    p, d = stubs("p"), stubs("d")
    r = Router(deepinfer_bin, [p.url], [d.url])
    try:
        d.stop()  # the decode worker goes away
        r.wait_health(503)
        assert "decode" in r.get("/health")[1]
        assert r.post("/v1/completions", {"prompt": "x"})[0] == 503
        d.restart()  # ... and comes back on its port
        r.wait_health(200)
        assert r.post("/v1/completions", {"prompt": "x"})[1]["choices"][0]["text"] == "d"
        p.healthy = False
        r.wait_health(503)
        assert "prefill" in r.get("/health")[1]
        p.healthy = True
        r.wait_health(200)
    finally:
        assert r.stop() == 0


def read_events(resp):
    events = []
    for line in resp.read().split(b"\n"):
        if line.startswith(b"data: "):
            events.append(line[6:])
    return events


def test_killed_decode_worker_ends_the_stream_with_an_error_and_later_requests_go_elsewhere(deepinfer_bin, model_dir,
                                                                                          stubs):
    p = stubs("p")
    doomed, survivor = Server(deepinfer_bin, model_dir), Server(deepinfer_bin, model_dir)
    try:
        r = Router(deepinfer_bin, [p.url], [doomed.base, survivor.base], "--upstream-read-timeout", "30")
    except Exception:
        doomed.stop(), survivor.stop()
        raise
    try:
        assert r.post("/router/drain", {"url": survivor.base})[0] == 200  # the stream must go to `doomed`
        conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=120)
        conn.request("POST", "/v1/completions", json.dumps({"model": "tiny", "prompt": "a long story", "max_tokens": 8000,
                                                             "ignore_eos": True, "stream": True}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.readline().startswith(b"data: ")
        assert r.post("/router/undrain", {"url": survivor.base})[0] == 200
        doomed.proc.send_signal(signal.SIGKILL)
        t0 = time.time()
        events = read_events(resp)  # ends: no hang
        assert time.time() - t0 < 60
        conn.close()
        assert events[-1] == b"[DONE]"
        error = json.loads(events[-2])["error"]
        assert error["code"] == "decode_failed" and doomed.base in error["message"]
        for e in events[:-2]:
            json.loads(e)  # every event before it is whole

        for i in range(4):  # later requests go to the survivor
            status, body = r.post("/v1/completions", {"model": "tiny", "prompt": f"after {i}", "max_tokens": 2})
            assert status == 200, body
        assert r.metric("deepinfer_router_worker_healthy", role="decode", url=doomed.base) == 0
        assert r.metric("deepinfer_router_upstream_errors_total", role="decode", url=doomed.base, kind="transport") >= 1
        assert r.metric("deepinfer_router_requests_total", endpoint="/v1/completions", outcome="upstream_failed") == 1
    finally:
        assert r.stop() == 0
        doomed.stop()
        assert survivor.stop() == 0


def test_a_stream_cut_mid_event_ends_after_its_last_whole_event(deepinfer_bin, stubs):
    p, d = stubs("p"), stubs("d")
    d.answers = ["cut"]
    r = Router(deepinfer_bin, [p.url], [d.url])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=60)
        conn.request("POST", "/v1/completions", b'{"prompt": "x", "stream": true}', {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        body = resp.read()
        conn.close()
        events = body.split(b"\n\n")
        assert events[0] == b'data: {"n": 1}'
        assert json.loads(events[1][6:])["error"]["code"] == "decode_failed"
        assert events[2:] == [b"data: [DONE]", b""]
        assert b"cut her" not in body
    finally:
        assert r.stop() == 0


def test_silent_decode_worker_times_out(deepinfer_bin, stubs):
    p, d = stubs("p"), stubs("d")
    d.answers = ["hang"]
    r = Router(deepinfer_bin, [p.url], [d.url], "--upstream-read-timeout", "1")
    try:
        t0 = time.time()
        status, body = r.post("/v1/completions", {"prompt": "x"}, timeout=60)
        assert status == 502 and "timed out" in body["error"]["message"]
        assert time.time() - t0 < 30
        assert r.metric("deepinfer_router_upstream_errors_total", role="decode", url=d.url, kind="timeout") == 1
    finally:
        assert r.stop() == 0


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise KeyError("VmRSS")


def test_slow_client_holds_back_the_decode_worker(deepinfer_bin, stubs):
    total = 96 << 20
    p, d = stubs("p"), stubs("d")
    d.answers = [("stream", total, 16 << 10)]
    r = Router(deepinfer_bin, [p.url], [d.url])
    try:
        s = socket.create_connection(("127.0.0.1", r.port), timeout=60)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        body = b'{"prompt": "x", "stream": true}'
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        received = s.recv(4096)
        assert received.startswith(b"HTTP/1.1 200")
        time.sleep(3)  # the client reads nothing meanwhile
        held = d.bytes_sent
        assert held < total // 3, held  # the stub is held back (socket buffers only), not drained into the router
        assert rss_bytes(r.proc.pid) < 64 << 20
        n_received, tail = len(received), received[-64:]
        while not tail.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"):  # the client catches up: every byte arrives
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            n_received += len(chunk)
            tail = (tail + chunk)[-64:]
        s.close()
        assert d.bytes_sent >= total
        assert n_received > total
    finally:
        assert r.stop() == 0
