"""A real `deepinfer serve` process on loopback for end-to-end tests: started on a free port,
ready when GET /health says 200, stopped with SIGTERM (its exit code is checked by callers)."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]


def make_model(out_dir, *extra, tokenizer_dir=ROOT / "tests" / "data" / "tokenizers" / "deepseek-v3"):
    """A small random DeepSeek-V3 with a real tokenizer and chat template (DeepSeek-V3's unless
    `tokenizer_dir` says otherwise)."""
    if not (pathlib.Path(out_dir) / "config.json").exists():
        subprocess.run([sys.executable, str(ROOT / "tools" / "make_checkpoint.py"), str(out_dir), "--preset", "tiny-v3",
                        "--tokenizer", str(tokenizer_dir), *extra],
                       check=True, capture_output=True, timeout=300)
    return pathlib.Path(out_dir)


class Server:
    def __init__(self, binary, model, *args, wait_ready=True):
        self.proc = subprocess.Popen(
            [binary, "serve", "--model", str(model), "--port", "0", "--served-model-name", "tiny",
             "--kv-cache-memory", str(256 << 20), *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.port = None
        deadline = time.time() + 60
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server exited early: " + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://[\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("server did not start: " + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.port}"
        if wait_ready:
            self.wait_ready()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise RuntimeError("server not ready: " + "".join(self.log))

    def get(self, path, headers=None):
        req = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path, body, headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "null")

    def metric(self, name):
        _, text = self.get("/metrics")
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def wait_idle(self, timeout=30):
        """Until no sequence runs or waits and the KV cache is empty again."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if (self.metric("deepinfer_num_requests_running") == 0 and self.metric("deepinfer_num_requests_waiting") == 0
                    and self.metric("deepinfer_kv_cache_usage_ratio") == 0):
                return
            time.sleep(0.05)
        raise AssertionError("the engine did not return to idle")

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
