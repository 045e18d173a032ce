"""`deepinfer router` in front of two ordinary `deepinfer serve` workers (each a complete
OpenAI server, i.e. a `both` worker of the P/D contract) and a stub prefill worker: through the
official openai client the outputs are those of a single server, requests spread over the
decode workers, a client that goes stops its worker's request, draining moves new requests
while the running ones finish, hostile requests get the server's kinds of errors, and SIGTERM
lets relayed requests finish."""
import concurrent.futures
import http.client
import json
import signal
import socket
import time

import openai
import pytest

from pd_cluster import chat, client_of
from pd_router_helpers import Router, StubWorker
from server import Server


@pytest.fixture(scope="module")
def workers(deepinfer_bin, model_dir):
    ws = [Server(deepinfer_bin, model_dir) for _ in range(2)]
    yield ws
    for w in ws:
        assert w.stop() == 0, "".join(w.log)


@pytest.fixture(scope="module")
def prefill():
    stub = StubWorker("prefill")
    yield stub
    stub.stop()


@pytest.fixture(scope="module")
def router(deepinfer_bin, workers, prefill):
    r = Router(deepinfer_bin, [prefill.url], [w.base for w in workers], "--max-body-bytes", str(1 << 20),
               "--max-header-bytes", "8192", "--read-timeout", "3")
    yield r
    assert r.stop() == 0, "".join(r.log)


def completions_run(client, stream, **kwargs):
    if not stream:
        r = client.completions.create(**kwargs)
        return [(c.text, c.finish_reason, c.logprobs and c.logprobs.top_logprobs) for c in r.choices], r.usage.completion_tokens
    text, finish = "", None
    for chunk in client.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            text += c.text
            finish = c.finish_reason or finish
    return [(text, finish, None)], None


@pytest.mark.parametrize("stream", [False, True])
def test_outputs_equal_a_single_server(router, server, stream):
    via_router, single = client_of(router.base), client_of(server.base)
    for prompt in ["The capital of France is", "1, 2, 3, 4,", "def fibonacci(n):"]:
        kwargs = dict(model="tiny", prompt=prompt, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
        if not stream:
            kwargs.update(logprobs=3, n=2)
        assert completions_run(via_router, stream, **kwargs) == completions_run(single, stream, **kwargs)
    for content in ["Hello! Who are you?", "Write a haiku about the sea."]:
        kwargs = dict(model="tiny", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}],
                      max_tokens=10, temperature=0)
        assert chat(via_router, stream, **kwargs) == chat(single, stream, **kwargs)


def test_models_health_and_metrics(router, workers, prefill):
    assert router.get("/health")[0] == 200
    models = client_of(router.base).models.list()
    assert [m.id for m in models.data] == ["tiny"]
    assert router.metric("deepinfer_router_healthy") == 1
    for w in workers:
        assert router.metric("deepinfer_router_worker_healthy", role="decode", url=w.base) == 1
    assert router.metric("deepinfer_router_worker_healthy", role="prefill", url=prefill.url) == 1


def worker_completions(w):
    _, text = w.get("/metrics")
    for line in text.splitlines():
        if line.startswith('deepinfer_requests_total{endpoint="/v1/completions",status="200"}'):
            return float(line.split()[1])
    return 0.0


def test_requests_spread_over_decode_workers(router, workers):
    before = [worker_completions(w) for w in workers]
    client = client_of(router.base)

    def one(i):
        return client.completions.create(model="tiny", prompt=f"request {i}", max_tokens=24, temperature=0,
                                          extra_body={"ignore_eos": True}).choices[0].finish_reason

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert list(pool.map(one, range(8))) == ["length"] * 8
    served = [worker_completions(w) - b for w, b in zip(workers, before)]
    assert sum(served) == 8
    assert min(served) >= 2, served  # a burst spreads before any poll could see it


def test_client_that_goes_stops_its_request_on_the_worker(router, workers):
    before = sum(w.metric("deepinfer_generation_tokens_total") for w in workers)
    conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps({"model": "tiny", "prompt": "go on", "max_tokens": 8000,
                                                         "ignore_eos": True, "stream": True, "temperature": 0}),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.readline().startswith(b"data: ")  # generating
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    for w in workers:
        w.wait_idle(timeout=60)
    generated = sum(w.metric("deepinfer_generation_tokens_total") for w in workers) - before
    assert 0 < generated < 8000  # stopped, not run to the end


def test_drain_moves_new_requests_and_lets_running_ones_finish(router, workers):
    conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=120)
    conn.request("POST", "/v1/completions", json.dumps({"model": "tiny", "prompt": "drain me", "max_tokens": 400,
                                                         "ignore_eos": True, "stream": True, "temperature": 0}),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.readline().startswith(b"data: ")
    busy = [w for w in workers if router.metric("deepinfer_router_worker_in_flight", role="decode", url=w.base) == 1]
    assert len(busy) == 1
    busy, other = busy[0], [w for w in workers if w is not busy][0]

    status, body = router.post("/router/drain", {"url": busy.base + "/"})
    assert status == 200 and body == {"url": busy.base, "draining": True, "in_flight": 1}
    assert router.metric("deepinfer_router_worker_draining", role="decode", url=busy.base) == 1
    sent_before = router.metric("deepinfer_router_worker_requests_total", role="decode", url=busy.base)
    client = client_of(router.base)
    for i in range(4):
        assert client.completions.create(model="tiny", prompt=f"moved {i}", max_tokens=3).choices[0].text is not None
    assert router.metric("deepinfer_router_worker_requests_total", role="decode", url=busy.base) == sent_before

    events = [line for line in resp.read().split(b"\n") if line.startswith(b"data: ")]
    conn.close()
    assert events[-1] == b"data: [DONE]"
    assert json.loads(events[-2][6:])["choices"][0]["finish_reason"] == "length"  # the running one finished

    status, body = router.post("/router/undrain", {"url": busy.base})
    assert status == 200 and body["draining"] is False
    assert router.metric("deepinfer_router_worker_draining", role="decode", url=busy.base) == 0
    assert router.post("/router/drain", {"url": "http://127.0.0.1:1"})[0] == 404
    assert router.post("/router/drain", {"url": 5})[0] == 400
    assert router.post("/router/drain", b"{")[0] == 400
    assert router.get("/router/drain")[0] == 405
    other.wait_idle()
    busy.wait_idle()


def raw_status(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(data)
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                return None
            buf += chunk
        return int(buf.split(b" ", 2)[1])
    finally:
        s.close()


def post_bytes(path, body, extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


HOSTILE = [
    post_bytes(b"/v1/completions", b'{"prompt": "x"'),
    post_bytes(b"/v1/completions", b"not json"),
    post_bytes(b"/v1/completions", b"[1, 2, 3]"),
    post_bytes(b"/v1/completions", b'{"prompt": "\xff\xfe bad utf-8"}'),
    post_bytes(b"/v1/completions", b'{"prompt": 5}'),
    post_bytes(b"/v1/completions", b'{"prompt": "x", "max_tokens": "many"}'),
    post_bytes(b"/v1/completions", b'{"prompt": "x", "stream": "yes"}'),
    post_bytes(b"/v1/chat/completions", b'{"messages": "hello"}'),
    post_bytes(b"/v1/chat/completions", b'{"messages": [{"role": "root", "content": "x"}]}'),
    post_bytes(b"/v1/completions", b"[" * 100 + b"]" * 100),
    post_bytes(b"/v1/completions", b'{"prompt": "' + b"x" * (2 << 20) + b'"}'),
    post_bytes(b"/v1/completions", b'{"prompt": "x", "model": "other"}'),
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
    b"GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 10000 + b"\r\n\r\n",
    b"NONSENSE\r\n\r\n",
]


@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_requests_get_the_servers_errors(router, server, data):
    expected = raw_status(server.port, data)
    assert expected is not None and expected >= 400
    assert raw_status(router.port, data) == expected
    assert router.get("/health")[0] == 200  # and the router keeps serving


def test_errors_are_openai_bodies(router):
    status, body = router.post("/v1/completions", b"{")
    assert status == 400 and body["error"]["type"] == "invalid_request_error" and body["error"]["message"]
    status, body = router.post("/v1/completions", {"prompt": "x", "max_tokens": "many"})
    assert status == 400 and body["error"]["param"] == "max_tokens"  # the worker's answer, relayed
    status, text = router.get("/nowhere")
    assert status == 404 and json.loads(text)["error"]["type"] == "not_found_error"


def test_api_key(deepinfer_bin, workers, prefill):
    r = Router(deepinfer_bin, [prefill.url], [workers[0].base], "--api-key", "sesame")
    try:
        status, body = r.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        assert r.post("/router/drain", {"url": workers[0].base})[0] == 401
        assert r.get("/v1/models")[0] == 401
        assert r.get("/health")[0] == 200
        ok = openai.OpenAI(base_url=r.base + "/v1", api_key="sesame", max_retries=0, timeout=60)
        assert ok.completions.create(model="tiny", prompt="x", max_tokens=2).choices[0].finish_reason == "length"
        assert r.post("/router/drain", {"url": workers[0].base}, {"Authorization": "bearer sesame"})[0] == 200
    finally:
        assert r.stop() == 0


def test_no_decode_worker_is_a_503(deepinfer_bin, prefill):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    url = "http://127.0.0.1:%d" % closed.getsockname()[1]
    r = Router(deepinfer_bin, [prefill.url], [url], wait_healthy=False)
    try:
        r.wait_health(503)
        status, body = r.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert status == 503 and body["error"]["code"] == "no_decode_worker"
        assert "decode" in r.get("/health")[1]
        assert r.get("/v1/models")[0] == 503  # no worker has told its model name
    finally:
        assert r.stop() == 0
        closed.close()


def test_sigterm_lets_relayed_requests_finish(deepinfer_bin, workers, prefill):
    r = Router(deepinfer_bin, [prefill.url], [w.base for w in workers], "--shutdown-timeout", "600")
    conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=600)
    conn.request("POST", "/v1/completions", json.dumps({"model": "tiny", "prompt": "finish me", "max_tokens": 100,
                                                         "ignore_eos": True, "stream": True}),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.readline().startswith(b"data: ")
    r.proc.send_signal(signal.SIGTERM)
    r.wait_health(503)  # draining: new requests are refused ...
    status, body = r.post("/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 1})
    assert status == 503 and "shutting down" in body["error"]["message"]
    events = [line for line in resp.read().split(b"\n") if line.startswith(b"data: ")]
    conn.close()
    assert events[-1] == b"data: [DONE]"  # ... while the running one finishes
    assert json.loads(events[-2][6:])["choices"][0]["finish_reason"] == "length"
    assert r.proc.wait(timeout=60) == 0
    assert any("draining the router" in line for line in r.log)


def test_sigterm_delivers_a_relayed_stream_to_a_client_that_reads_late(deepinfer_bin, workers, prefill):
    """The relay's last chunks may still be queued for a slow reader when its worker's answer ends:
    the router sends them before it exits."""
    r = Router(deepinfer_bin, [prefill.url], [w.base for w in workers], "--shutdown-timeout", "600")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", r.port))
    body = json.dumps({"model": "tiny", "prompt": "x", "max_tokens": 2000, "ignore_eos": True, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                 str(len(body)).encode() + b"\r\n\r\n" + body)
    assert sock.recv(12) == b"HTTP/1.1 200"
    r.proc.send_signal(signal.SIGTERM)
    r.wait_health(503)
    rest = b""
    while chunk := sock.recv(2048):  # slowly: the worker is done long before this reader
        rest += chunk
        time.sleep(0.005)
    sock.close()
    assert rest.endswith(b"0\r\n\r\n") and b"data: [DONE]" in rest, rest[-300:]
    assert b'"finish_reason":"length"' in rest
    assert r.proc.wait(timeout=60) == 0
