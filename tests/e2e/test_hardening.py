"""Hardening against hostile and careless clients, against the real server process:
- request fields of the wrong JSON type and deeply nested bodies get a 400 naming the problem,
  never a crash (each case is followed by a /health check on the same process);
- a tiny positive temperature samples greedily instead of from NaN scores;
- a client that pipelines a second request and then goes is still noticed;
- HTTP details: HTTP/1.0 streams without chunked encoding (RFC 9112 §7.1 forbids it for 1.0),
  `Expect: 100-continue` is answered (RFC 9110 §10.1.1), the Bearer scheme is case-insensitive and
  401s carry WWW-Authenticate (RFC 7235 §2.1, §4.1; RFC 6750 §3);
- the policies the README states (default max_tokens, protected template variables, a broken
  tokenizer_config.json, draining, counted 413s, heavy bodies off the network threads, /health
  while loading, `param` on engine-level errors)."""
import http.client
import json
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error

import pytest

from server import Server

ROUTES = ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"]
BASE = {
    "/v1/completions": {"prompt": "x", "max_tokens": 1},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
    "/tokenize": {"prompt": "x"},
    "/detokenize": {"tokens": [1]},
}
FIELDS = ["model", "prompt", "messages", "stream", "stream_options", "n", "temperature", "top_p", "top_k", "min_p",
          "presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens", "ignore_eos", "seed",
          "logit_bias", "stop_token_ids", "stop", "user", "response_format", "best_of", "max_tokens",
          "max_completion_tokens", "echo", "logprobs", "top_logprobs", "suffix", "add_generation_prompt",
          "chat_template_kwargs", "tools", "tool_choice", "tokens", "add_special_tokens"]


def nested(depth, inner="1"):
    return "[" * depth + inner + "]" * depth


# Every JSON type, as raw JSON text (so that nesting can exceed Python's recursion limit).
VALUES = ["null", "true", "false", "0", "-1", "1e308", "18446744073709551615", '"s"', "[]", '[1, "a"]', "{}",
          '{"type": 5, "text": null, "function": 3}', nested(1000)]


def body_with(route, field, raw_value):
    base = dict(BASE[route])
    base.pop(field, None)
    text = json.dumps(base)
    return (text[:-1] + (", " if base else "") + json.dumps(field) + ": " + raw_value + "}").encode()


def request(port, method, path, body=None, headers=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace"), dict(r.getheaders())
    finally:
        c.close()


def assert_alive(server):
    assert request(server.port, "GET", "/health")[0] == 200, "".join(server.log)


@pytest.fixture(scope="module")
def policy_server(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--default-max-tokens", "5", "--max-num-seqs", "2", "--max-body-bytes",
               str(1 << 20))
    yield s
    assert s.stop() == 0, "".join(s.log)


# Defect 1: a non-string "type" wherever the parser reads one (content parts, tools, tool_choice),
# on chat and /tokenize alike.
@pytest.mark.parametrize("type_value", [5, None, True, [1], {"a": 1}])
@pytest.mark.parametrize("route", ["/v1/chat/completions", "/tokenize"])
def test_non_string_type_is_a_400(server, route, type_value):
    bodies = [
        {"messages": [{"role": "user", "content": [{"type": type_value, "text": "hi"}]}], "max_tokens": 2},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
         "tools": [{"type": type_value, "function": {"name": "f"}}]},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
         "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": type_value}},
    ]
    for body in bodies:
        status, text, _ = request(server.port, "POST", route, json.dumps(body))
        assert status == 400, text
        err = json.loads(text)["error"]
        assert err["param"] in ("messages", "tools", "tool_choice")
        assert_alive(server)


# Defect 2: deep nesting anywhere in a body, on every route, is a 400 before any tree is built.
@pytest.mark.parametrize("route,body", [
    ("/detokenize", '{"x":' + nested(50000) + ',"tokens":[1]}'),
    ("/v1/chat/completions", '{"messages":[{"role":"user","content":"hi","extra":' + nested(20000) + '}]}'),
    ("/v1/chat/completions", '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"a":' +
     nested(20000) + '}}'),
    ("/v1/chat/completions", '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",'
     '"function":{"name":"f","parameters":' + nested(20000, "{}") + '}}]}'),
    ("/tokenize", '{"messages":[{"role":"user","content":"hi","x":' + nested(20000) + '}]}'),
    ("/v1/completions", '{"prompt":"x","logit_bias":' + "{\"a\":" * 20000 + "1" + "}" * 20000 + '}'),
])
def test_deeply_nested_bodies_are_a_400(server, route, body):
    status, text, _ = request(server.port, "POST", route, body)
    assert status == 400, text
    assert "deeper than 64" in json.loads(text)["error"]["message"]
    assert_alive(server)


def test_64_levels_are_accepted(server):
    body = '{"prompt":"x","max_tokens":1,"extra":' + nested(63) + '}'
    assert request(server.port, "POST", "/v1/completions", body)[0] == 200


# Every field with every JSON type on every route: an answer below 500 and a live server after each.
def test_every_field_with_every_type_on_every_route(policy_server):
    counts = {}
    for route in ROUTES:
        for field in FIELDS:
            for value in VALUES:
                status, text, _ = request(policy_server.port, "POST", route, body_with(route, field, value))
                assert status < 500, (route, field, value[:40], text)
                counts[status] = counts.get(status, 0) + 1
                assert_alive(policy_server)
    assert counts.get(400, 0) > 0 and counts.get(200, 0) > 0
    policy_server.wait_idle()


# Defect 3: 1/T overflows for a tiny positive temperature; below 1e-5 it samples greedily.
def test_tiny_temperature_is_greedy(server):
    def run(temperature, seed):
        status, body = server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8,
                                                       "temperature": temperature, "seed": seed, "ignore_eos": True})
        assert status == 200, body
        return body["choices"][0]["text"]
    greedy = run(0, 1)
    for t in (1e-39, 1e-30, 1e-6):
        for seed in (1, 2, 3):
            assert run(t, seed) == greedy


def tokens_per_second(server):
    t0 = time.time()
    status, body = server.post("/v1/completions", {"prompt": "x", "max_tokens": 200, "ignore_eos": True,
                                                   "temperature": 0})
    assert status == 200
    return 200 / (time.time() - t0)


# Defect 4: the disconnect watch keeps watching after a pipelined request arrived.
def test_disconnect_after_a_pipelined_request_aborts(server):
    status, models = server.get("/v1/models")
    max_len = json.loads(models)["data"][0]["max_model_len"]
    n = min(max_len - 16, int(tokens_per_second(server) * 20))  # ~20 s of decoding, if the client stayed
    first = json.dumps({"prompt": "x", "max_tokens": n, "ignore_eos": True}).encode()
    second = json.dumps({"prompt": "y", "max_tokens": 2}).encode()
    req = lambda b: (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b)
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(req(first) + req(second))
        deadline = time.time() + 10
        while server.metric("deepinfer_num_requests_running") == 0:
            assert time.time() < deadline
            time.sleep(0.02)
    t0 = time.time()
    server.wait_idle(timeout=5)  # within a few steps, not after n tokens
    assert time.time() - t0 < 5


def read_all(sock):
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_http10_streams_without_chunked_encoding(server):
    body = json.dumps({"prompt": "x", "max_tokens": 4, "stream": True, "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        data = read_all(s)  # the server closes the connection to end the stream
    head, _, payload = data.partition(b"\r\n\r\n")
    assert b"200" in head.split(b"\r\n")[0]
    assert b"transfer-encoding" not in head.lower()
    assert b"connection: close" in head.lower()
    events = [line for line in payload.split(b"\n") if line]
    assert all(line.startswith(b"data: ") for line in events), payload[:200]
    assert events[-1] == b"data: [DONE]"


def test_expect_100_continue_is_answered(server):
    body = json.dumps({"prompt": "x", "max_tokens": 1}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json"
                  b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")  # before the body is sent
        s.sendall(body)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
    # A body announced over the limit gets its 413 at once, without being sent.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 999999999"
                  b"\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 413")


def test_bearer_scheme_is_case_insensitive(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--api-key", "k3y")
    try:
        for auth in ("Bearer k3y", "bearer k3y", "BEARER   k3y"):
            assert request(s.port, "GET", "/v1/models", headers={"Authorization": auth})[0] == 200, auth
        for auth in ("Basic k3y", "Bearer", "Bearerk3y", "Bearer K3Y"):
            status, _, headers = request(s.port, "GET", "/v1/models", headers={"Authorization": auth})
            assert status == 401, auth
            assert headers.get("WWW-Authenticate", "").startswith("Bearer"), headers
    finally:
        assert s.stop() == 0


# Policies (README "Limits and policies").
def test_chat_without_max_tokens_stops_at_the_default(policy_server):
    status, body = policy_server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                               "ignore_eos": True})
    assert status == 200
    assert body["usage"]["completion_tokens"] == 5 and body["choices"][0]["finish_reason"] == "length"
    status, body = policy_server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                               "ignore_eos": True, "max_tokens": 9})
    assert body["usage"]["completion_tokens"] == 9


@pytest.mark.parametrize("key", ["bos_token", "eos_token", "messages", "add_generation_prompt", "tools"])
def test_chat_template_kwargs_cannot_set_server_variables(policy_server, key):
    status, body = policy_server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                               "chat_template_kwargs": {key: "x"}})
    assert status == 400
    assert body["error"]["param"] == "chat_template_kwargs" and key in body["error"]["message"]


def test_engine_errors_name_the_field(policy_server):
    status, body = policy_server.post("/v1/completions", {"prompt": "x", "n": 3, "max_tokens": 1})
    assert status == 400 and body["error"]["param"] == "n", body  # above --max-num-seqs 2


def test_413_is_counted(policy_server):
    def count():
        _, text, _ = request(policy_server.port, "GET", "/metrics")
        for line in text.splitlines():
            if line.startswith('deepinfer_requests_total{endpoint="/v1/completions",status="413"}'):
                return float(line.split()[1])
        return 0.0
    before = count()
    status, _, _ = request(policy_server.port, "POST", "/v1/completions", b'{"prompt": "' + b"a" * (2 << 20) + b'"}')
    assert status == 413
    assert count() == before + 1


def test_broken_tokenizer_config_fails_at_start(deepinfer_bin, model_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    (broken / "tokenizer_config.json").write_text('{"chat_template": ')
    p = subprocess.run([deepinfer_bin, "serve", "--model", str(broken), "--port", "0"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode != 0
    assert "tokenizer_config.json" in p.stderr


def test_health_is_503_while_the_model_loads(deepinfer_bin, model_dir, monkeypatch):
    monkeypatch.setenv("DEEPINFER_LOAD_DELAY_MS", "3000")
    s = Server(deepinfer_bin, model_dir, wait_ready=False)
    try:
        status, text, _ = request(s.port, "GET", "/health")
        assert status == 503 and "loading" in json.loads(text)["error"]["message"]
        status, text, _ = request(s.port, "POST", "/v1/completions", json.dumps({"prompt": "x"}))
        assert status == 503
        s.wait_ready()
        assert request(s.port, "GET", "/health")[0] == 200
    finally:
        assert s.stop() == 0


def test_heavy_tokenize_does_not_delay_health(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--http-threads", "1", "--max-body-bytes", str(32 << 20))
    try:
        text = "hello world, " * (1 << 20)  # 13 MB of text, ~3.4M tokens: an answer larger than the stream buffer
        body = json.dumps({"prompt": text, "add_special_tokens": False})
        done = {}

        def tokenize():
            t0 = time.time()
            done["status"] = request(s.port, "POST", "/tokenize", body, timeout=300)[0]
            done["seconds"] = time.time() - t0
        t = threading.Thread(target=tokenize)
        t.start()
        time.sleep(0.5)  # the body is in and being tokenized
        health = []
        while t.is_alive() and len(health) < 20:
            t0 = time.time()
            assert request(s.port, "GET", "/health", timeout=60)[0] == 200
            health.append(time.time() - t0)
            time.sleep(0.05)
        t.join()
        assert done["status"] == 200
        assert health, "tokenizing finished before /health was asked"
        assert max(health) < 0.5, (health, done)
    finally:
        assert s.stop() == 0


def test_draining_answers_503(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--shutdown-timeout", "60")
    try:
        sock = socket.create_connection(("127.0.0.1", s.port))
        body = json.dumps({"prompt": "x", "max_tokens": 300, "ignore_eos": True, "stream": True}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        status, text, headers = request(s.port, "POST", "/v1/completions", json.dumps({"prompt": "x"}))
        assert status == 503 and "shutting down" in json.loads(text)["error"]["message"]
        assert request(s.port, "GET", "/health")[0] == 503
        rest = read_all(sock)
        assert rest.endswith(b"0\r\n\r\n") and b"data: [DONE]" in rest
        assert s.proc.wait(timeout=60) == 0
    finally:
        s.stop()


def test_draining_delivers_a_finished_stream_to_a_client_that_reads_late(deepinfer_bin, model_dir):
    """A stream whose generation ends while its last bytes still wait in the server (its client
    reads slowly) is delivered whole before the server exits: finished work is never cut off."""
    s = Server(deepinfer_bin, model_dir, "--shutdown-timeout", "60")
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel cannot hold the stream
        sock.connect(("127.0.0.1", s.port))
        body = json.dumps({"prompt": "x", "max_tokens": 3000, "ignore_eos": True, "stream": True}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        head = sock.recv(12)
        assert head == b"HTTP/1.1 200"
        s.proc.send_signal(signal.SIGTERM)
        # Not reading: the generation finishes with most of its chunks queued in the server.
        deadline = time.time() + 60
        while not any("draining" in line for line in s.log) and time.time() < deadline:
            time.sleep(0.05)
        while time.time() < deadline:  # until the generation is over (or the server has gone)
            try:
                status, text = s.get("/metrics")
            except urllib.error.URLError:
                break
            if status != 200 or "deepinfer_num_requests_running 0" in text:
                break
            time.sleep(0.1)
        time.sleep(1.0)
        rest = read_all(sock)
        assert rest.endswith(b"0\r\n\r\n") and b"data: [DONE]" in rest, rest[-300:]
        assert b'"finish_reason":"length"' in rest
        assert s.proc.wait(timeout=60) == 0
    finally:
        s.stop()


def test_speculative_server_streams_the_plain_output(deepinfer_bin, model_dir, server):
    """--speculative ngram through the server: streamed and not, the text and logprobs equal the
    plain server's, and /metrics has the draft counters (acceptance itself is checked on the
    tiny-v3 fixture in tests/model/test_speculative.py and with always-right drafts in
    engine_core_test.cpp: this random model's 128K vocabulary rarely repeats)."""
    s = Server(deepinfer_bin, model_dir, "--speculative", "ngram", "--num-speculative-tokens", "3")
    try:
        prompt = "one two three four five six seven eight " * 6
        for stream in (False, True):
            body = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True, "logprobs": 1}
            want = server.post("/v1/completions", body)[1]
            if not stream:
                got = s.post("/v1/completions", body)[1]
                assert got["choices"][0]["text"] == want["choices"][0]["text"]
                assert got["choices"][0]["logprobs"] == want["choices"][0]["logprobs"]
            else:
                status, text, _ = request(s.port, "POST", "/v1/completions", json.dumps({**body, "stream": True}))
                assert status == 200
                pieces = [json.loads(line[6:])["choices"][0]["text"] for line in text.splitlines()
                          if line.startswith("data: {") and json.loads(line[6:])["choices"]]
                assert "".join(pieces) == want["choices"][0]["text"]
        drafted = s.metric("deepinfer_spec_decode_draft_tokens_total")
        accepted = s.metric("deepinfer_spec_decode_accepted_tokens_total")
        assert 0 <= accepted <= drafted
        # Per draft position: they add up to the totals, and a position accepts at most what it drafted.
        _, text = s.get("/metrics")
        per_pos = {}
        for line in text.splitlines():
            for kind in ("draft", "accepted"):
                prefix = f'deepinfer_spec_decode_{kind}_tokens_per_pos_total{{position="'
                if line.startswith(prefix):
                    per_pos[(kind, int(line[len(prefix):].split('"')[0]))] = float(line.split()[-1])
        assert sum(v for (kind, _), v in per_pos.items() if kind == "draft") == drafted
        assert sum(v for (kind, _), v in per_pos.items() if kind == "accepted") == accepted
        assert all(per_pos[("accepted", i)] <= per_pos[("draft", i)] for (kind, i) in per_pos if kind == "accepted")
    finally:
        assert s.stop() == 0
