"""Helpers for the router's end-to-end tests: a `deepinfer router` process, and a stub worker
(in this process) whose health, load and answers a test controls and whose received requests it
can inspect: the prefill and decode sides of the P/D contract (docs/architecture.md)."""
import http.server
import json
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request


class Router:
    """`deepinfer router` on a free loopback port, checking workers often (flags in `args` win);
    stopped with SIGTERM."""

    def __init__(self, binary, prefill, decode, *args, wait_healthy=True):
        defaults = {"--health-interval": "0.2", "--health-max-backoff": "1", "--health-timeout": "2"}
        for flag in args:
            defaults.pop(flag, None)
        self.proc = subprocess.Popen(
            [binary, "router", "--prefill", ",".join(prefill), "--decode", ",".join(decode), "--port", "0",
             *[x for kv in defaults.items() for x in kv], *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        line = self.proc.stderr.readline()
        self.log.append(line)
        m = re.search(r"listening on http://[\d.]+:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("router did not start: " + line + self.proc.stderr.read())
        self.port = int(m.group(1))
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._drain, daemon=True).start()
        if wait_healthy:
            try:
                self.wait_health(200)
            except AssertionError:
                self.proc.kill()
                raise

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def get(self, path, headers=None):
        req = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path, body, headers=None, timeout=120):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "null")

    def wait_health(self, status, timeout=30):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = self.get("/health")[0]
            if last == status:
                return
            time.sleep(0.05)
        raise AssertionError(f"router /health stayed {last}, expected {status}")

    def metrics(self):
        """{(name, frozenset(labels)): value} of the router's /metrics."""
        out = {}
        for line in self.get("/metrics")[1].splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"([a-z_:]+)(?:\{(.*)\})? (\S+)$", line)
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
        return out

    def metric(self, name, **labels):
        return self.metrics().get((name, frozenset(labels.items())), 0.0)

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def completion_body(text):
    return {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": "tiny",
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class StubWorker:
    """A worker stub on a loopback port. `healthy` sets /health's answer; `answers` is a list
    of what POSTs get, one per request, the last repeating: "ok" (a completion whose text is
    this stub's name), "retry" (503 with X-DeepInfer-Retry: prefill), "hang" (nothing for 60 s),
    "cut" (an SSE stream that ends after one and a half events), or ("stream", n_bytes, chunk_bytes) (an SSE stream of that size, written as fast as the
    socket takes it). Every
    POST's headers are kept in `requests`."""

    def __init__(self, name, port=0):
        self.name = name
        self.healthy = True
        self.answers = ["ok"]
        self.requests = []
        self.bytes_sent = 0
        self.connections = []
        self.lock = threading.Lock()
        self._start(port)

    def _start(self, port):
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with stub.lock:
                    stub.connections.append(self.connection)

            def reply(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/health":
                    return self.reply(200 if stub.healthy else 503, {"status": "ok" if stub.healthy else "down"})
                if self.path == "/metrics":
                    text = ("deepinfer_num_requests_running 0\ndeepinfer_num_requests_waiting 0\n"
                            "deepinfer_kv_cache_usage_ratio 0\n").encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    return self.wfile.write(text)
                if self.path == "/v1/models":
                    return self.reply(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})
                self.reply(404, {"error": {"message": "no route"}})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with stub.lock:
                    stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    answer = stub.answers[0] if len(stub.answers) == 1 else stub.answers.pop(0)
                if answer == "ok":
                    return self.reply(200, completion_body(stub.name))
                if answer == "retry":
                    return self.reply(503, {"error": {"message": f"{stub.name}: the prefill worker failed",
                                                      "type": "service_unavailable", "param": None, "code": None}},
                                      [("X-DeepInfer-Retry", "prefill")])
                if answer == "hang":
                    time.sleep(60)
                    return
                if answer == "cut":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    piece = b'data: {"n": 1}\n\ndata: {"n": 2, "cut her'
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))  # and no last chunk: a crash
                    self.wfile.flush()
                    self.close_connection = True
                    return
                _, n_bytes, chunk = answer
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                event = b"data: " + b"x" * (chunk - 8) + b"\n\n"
                try:
                    sent = 0
                    while sent < n_bytes:
                        self.wfile.write(event)
                        sent += len(event)
                        with stub.lock:
                            stub.bytes_sent += len(event)
                    self.wfile.write(b"data: [DONE]\n\n")
                except OSError:
                    pass
                self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def prefill_urls_seen(self):
        with self.lock:
            return [r["headers"].get("X-DeepInfer-Prefill-Url") for r in self.requests]

    def stop(self):
        """Stops listening and closes every connection, as a dead worker would."""
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for c in self.connections:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.connections.clear()

    def restart(self):
        """Listens again on the same port, as a restarted worker would."""
        self._start(self.port)

