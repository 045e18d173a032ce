"""Hostile input: every malformed, oversized, slow or vanishing client gets its 4xx (or a clean
close), the server keeps serving, and the KV cache returns to idle. Expected statuses follow
the OpenAI API's error conventions and HTTP (RFC 9110: 413, 431; RFC 6585: 429)."""
import json
import socket
import time

import pytest


def raw(server, data, read=True, timeout=10):
    """Sends raw bytes; returns the response's status code (None on a close without answer)."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return None
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                return None
            buf += chunk
        return int(buf.split(b" ", 2)[1])
    finally:
        s.close()


def post_bytes(path, body, extra_headers=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n" + extra_headers + b"\r\n" + body)


@pytest.mark.parametrize("body", [
    b'{"prompt": "x"',                       # truncated JSON
    b"not json at all",
    b"[1, 2, 3]",                            # not an object
    b'{"prompt": "\xff\xfe bad utf-8"}',     # invalid UTF-8 inside a string
    b'{"prompt": 5}',
    b'{"prompt": "x", "max_tokens": -1}',
    b'{"prompt": "x", "max_tokens": 1e308}',
    b'{"prompt": "x", "n": 100000000000000000000}',
    b'{"prompt": "x", "temperature": "hot"}',
    b'{"prompt": [1, -5]}',
    b'{"prompt": [[]]}',
    b'{"prompt": "x", "logit_bias": {"999999999": 1}}',
    b'{"prompt": "x", "top_p": 0}',
    b'{"prompt": "x", "stream": "yes"}',
])
def test_malformed_completion_bodies_get_400(server, body):
    assert raw(server, post_bytes(b"/v1/completions", body)) == 400


@pytest.mark.parametrize("body", [
    {"messages": "hello"},
    {"messages": []},
    {"messages": [{"role": "root", "content": "x"}]},
    {"messages": [{"role": "user", "content": {"nested": True}}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
    {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
    {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 50, "logprobs": True},
])
def test_malformed_chat_bodies_get_400(server, body):
    status, err = server.post("/v1/chat/completions", body)
    assert status == 400
    assert set(err["error"]) == {"message", "type", "param", "code"}


def test_thousands_of_stop_strings(server):
    status, err = server.post("/v1/completions", {"prompt": "x", "stop": [f"s{i}" for i in range(5000)]})
    assert status == 400 and err["error"]["param"] == "stop"


def test_megabyte_prompt_is_rejected_by_size(server):
    status, err = server.post("/v1/completions", {"prompt": "a" * (2 << 20)})
    assert status == 413 and "limit" in err["error"]["message"]


def test_long_prompt_over_context_names_both_numbers(server):
    status, err = server.post("/v1/completions", {"prompt": "word " * 9000, "max_tokens": 10})
    assert status == 400
    assert "8192" in err["error"]["message"] and "10" in err["error"]["message"]


def test_oversized_headers(server):
    big = b"X-Filler: " + b"a" * 20000 + b"\r\n"
    assert raw(server, post_bytes(b"/v1/completions", b'{"prompt": "x"}', big)) == 431


def test_garbage_request_line(server):
    assert raw(server, b"\x00\x01GARBAGE\r\n\r\n") == 400


def test_unknown_path_and_method(server):
    assert server.get("/v2/whatever")[0] == 404
    assert server.get("/v1/completions")[0] == 405


def test_truncated_body_then_close(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\":")
    s.close()
    assert server.get("/health")[0] == 200


def test_slow_clients_are_dropped_and_others_served(server):
    slow = []
    for _ in range(20):  # slowloris: headers that never finish
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    status, body = server.post("/v1/completions", {"prompt": "still serving", "max_tokens": 2})
    assert status == 200 and len(body["choices"]) == 1
    time.sleep(4)  # past --read-timeout 3: the server closes them
    for s in slow:
        s.settimeout(5)
        assert s.recv(100) == b""
        s.close()


def test_abrupt_disconnect_mid_stream_frees_the_request(server):
    body = json.dumps({"prompt": "tell me a long story", "max_tokens": 2000, "stream": True,
                       "ignore_eos": True}).encode()
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(post_bytes(b"/v1/completions", body))
            s.settimeout(30)
            received = b""
            while b"data: " not in received:  # the first token has streamed
                chunk = s.recv(4096)
                assert chunk, "closed before the first token"
                received += chunk
        # leaving the block closes the socket mid-stream
    server.wait_idle(timeout=10)
    status, _ = server.post("/v1/completions", {"prompt": "after", "max_tokens": 2})
    assert status == 200


def test_server_is_idle_after_the_suite(server):
    server.wait_idle()
    assert server.get("/health")[0] == 200
