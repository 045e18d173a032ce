"""Server behaviour around requests: API keys, a full waiting queue (429 with Retry-After),
request timeouts, and SIGTERM draining in-flight requests before exiting 0. Each test runs its
own server process with the options under test."""
import json
import signal
import socket
import time

import openai
import pytest

from server import Server


def test_api_key(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--api-key", "sekrit")
    try:
        assert s.get("/health")[0] == 200
        assert s.get("/v1/models")[0] == 401
        status, err = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1}, {"Authorization": "Bearer wrong"})
        assert status == 401 and err["error"]["type"] == "authentication_error"
        good = openai.OpenAI(base_url=s.base + "/v1", api_key="sekrit", max_retries=0)
        assert good.completions.create(model="tiny", prompt="x", max_tokens=1).choices
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=s.base + "/v1", api_key="sekrit2", max_retries=0).models.list()
    finally:
        assert s.stop() == 0


def test_bf16_activations_serve(deepinfer_bin, model_dir):
    """--activation-dtype bf16 is a serving option: the server says so at start and answers
    (tests/model/test_golden.py bounds its error against the reference)."""
    s = Server(deepinfer_bin, model_dir, "--activation-dtype", "bf16")
    try:
        client = openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=120)
        out = client.completions.create(model="tiny", prompt="The quick brown fox", max_tokens=8, temperature=0,
                                        extra_body={"ignore_eos": True})
        assert out.usage.completion_tokens == 8 and out.choices[0].finish_reason == "length"
        assert any("bf16 activations" in line for line in s.log), "".join(s.log)
    finally:
        assert s.stop() == 0


def test_bad_activation_dtype_fails_at_start(deepinfer_bin, model_dir):
    with pytest.raises(RuntimeError, match="--activation-dtype"):
        Server(deepinfer_bin, model_dir, "--activation-dtype", "int4")


def send_raw(port, body):
    sock = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(data)).encode() +
                 b"\r\n\r\n" + data)
    return sock


def test_full_queue_gets_429_with_retry_after(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--max-num-seqs", "1", "--max-queued-requests", "1")
    try:
        long = {"prompt": "x", "max_tokens": 7000, "ignore_eos": True}
        deadline = time.time() + 30

        def wait_for(name):
            while s.metric(name) < 1:
                assert time.time() < deadline, name
                time.sleep(0.05)

        running = send_raw(s.port, long)
        wait_for("deepinfer_num_requests_running")
        waiting = send_raw(s.port, long)
        wait_for("deepinfer_num_requests_waiting")
        rejected = send_raw(s.port, {"prompt": "y", "max_tokens": 1})
        rejected.settimeout(10)
        head = rejected.recv(4096).decode()
        assert head.startswith("HTTP/1.1 429") and "Retry-After: 1" in head
        assert '"type":"rate_limit_error"' in head
        for sock in (rejected, running, waiting):  # leaving aborts the long requests
            sock.close()
        s.wait_idle()
    finally:
        assert s.stop() == 0


def test_request_timeout(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--request-timeout", "0.5", "--max-num-batched-tokens", "16")
    try:
        status, err = s.post("/v1/completions", {"prompt": "x", "max_tokens": 5000, "ignore_eos": True})
        assert status == 408 and "timed out" in err["error"]["message"]
        s.wait_idle()
    finally:
        assert s.stop() == 0


def test_sigterm_drains_in_flight_requests(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--shutdown-timeout", "60")
    client = openai.OpenAI(base_url=s.base + "/v1", api_key="x", max_retries=0)
    stream = client.completions.create(model="tiny", prompt="a long answer", max_tokens=200, stream=True,
                                       extra_body={"ignore_eos": True})
    first = next(iter(stream))
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    status, err = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1})  # draining: new work gets 503
    assert status == 503 and err["error"]["type"] == "service_unavailable"
    rest = list(stream)
    assert first.choices and rest[-1].choices[0].finish_reason == "length"
    assert s.proc.wait(timeout=60) == 0


def test_sigterm_aborts_past_the_shutdown_timeout(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--shutdown-timeout", "0.5", "--max-num-batched-tokens", "16")
    sock = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"prompt": "x", "max_tokens": 7000, "ignore_eos": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
                 b"\r\n\r\n" + body)
    time.sleep(0.5)
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=30) == 0
    sock.settimeout(5)
    assert sock.recv(4096).startswith(b"HTTP/1.1 503")
