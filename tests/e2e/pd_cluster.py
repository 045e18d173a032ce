"""What the prefill/decode tests share: prompts long enough to move KV, the official client's outputs
in a comparable form, the workers' `deepinfer_pd_*` metrics and the wait until they hold nothing,
and a cluster of router + 2 prefill + 2 decode workers on separate hosts (pd_netns) with a bounded
raw client for it (every request must end within REQUEST_TIMEOUT_S, or it counts as hung)."""
import contextlib
import json
import signal
import time
import urllib.error
import urllib.request

import openai

import pd_netns
from pd_router_helpers import Router
from server import Server

BLOCK = ["--block-size", "16"]
REQUEST_TIMEOUT_S = 120


def pd_metric(server, name, role):
    return server.metric(f'{name}{{role="{role}"}}')


def wait_released(servers, role, timeout=30):
    """Until each server holds no block pinned for a transfer and its engine is idle."""
    for s in servers:
        deadline = time.time() + timeout
        while pd_metric(s, "deepinfer_pd_blocks_held", role) != 0:
            assert time.time() < deadline, f"{s.base} still holds blocks pinned for transfers"
            time.sleep(0.05)
        s.wait_idle(timeout)


def all_released(prefills, decodes):
    wait_released(decodes, "decode", timeout=60)
    wait_released(prefills, "prefill", timeout=60)


def long_prompt(i):
    return f"Story {i}. " + " ".join(f"word{(i * 31 + k * 7) % 97}" for k in range(60))


def client_of(base):
    return openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=REQUEST_TIMEOUT_S)


def completion(client, stream, **kwargs):
    """[(text, finish_reason, top logprobs)] per choice (a stream: one choice, no logprobs)."""
    if not stream:
        r = client.completions.create(**kwargs)
        return [(c.text, c.finish_reason, c.logprobs and c.logprobs.top_logprobs) for c in r.choices]
    text, finish = "", None
    for chunk in client.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            text += c.text
            finish = c.finish_reason or finish
    return [(text, finish, None)]


def chat(client, stream, **kwargs):
    """[(content, finish_reason)] per choice."""
    if not stream:
        r = client.chat.completions.create(**kwargs)
        return [(c.message.content, c.finish_reason) for c in r.choices]
    text, finish = "", None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return [(text, finish)]


def post(base, body, stream):
    """(status, text, finish) of a completion; `text` is None when the request failed, and then
    `finish` is the error body. Raises on no answer within REQUEST_TIMEOUT_S."""
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps({**body, "stream": stream}).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as r:
            if not stream:
                c = json.loads(r.read().decode())["choices"][0]
                return r.status, c["text"], c["finish_reason"]
            text, finish = "", None
            for line in r.read().decode().splitlines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    return r.status, None, event
                for c in event["choices"]:
                    text += c["text"]
                    finish = c["finish_reason"] or finish
            return r.status, text, finish
    except urllib.error.HTTPError as e:
        return e.code, None, json.loads(e.read().decode() or "null")


def assert_bounded(outcome, want, context=""):
    """Right output, or a clear error: a 5xx with an OpenAI error body, or a stream's error event."""
    status, text, finish = outcome
    if text is not None:
        assert status == 200 and (text, finish) == want, (outcome, want, context)
    else:
        assert isinstance(finish, dict) and finish["error"]["message"], (outcome, context)
        assert status >= 500 or status == 200, (outcome, context)


def host_worker(hosts, i, binary, model_dir, *args, env=()):
    """`deepinfer serve` on host i (its own namespace), listening on the host's address."""
    hosts.add(i)
    s = Server(hosts.launcher(i, binary, env), model_dir, *BLOCK, "--host", hosts.addr(i), *args, wait_ready=False)
    s.base = f"http://{hosts.addr(i)}:{s.port}"
    s.wait_ready()
    return s


@contextlib.contextmanager
def hosts_cluster(binary, model_dir, tmp_dir, pd_timeout_s=5, lease_s=30, prefill_env=()):
    """(hosts, [2 prefill workers], [2 decode workers], router), each worker on its own host:
    prefill workers (with `prefill_env` in their environment) are hosts 0 and 1, decode workers 2 and 3."""
    hosts = pd_netns.Hosts(tmp_dir)
    started = []
    try:
        prefills = [host_worker(hosts, i, binary, model_dir, "--role", "prefill", "--pd-lease", str(lease_s),
                                env=prefill_env) for i in (0, 1)]
        started += prefills
        decodes = [host_worker(hosts, i, binary, model_dir, "--role", "decode", "--pd-min-prefill-tokens", "20",
                               "--pd-timeout", str(pd_timeout_s)) for i in (2, 3)]
        started += decodes
        router = Router(binary, [p.base for p in prefills], [d.base for d in decodes])
        started.append(router)
        yield hosts, prefills, decodes, router
    finally:
        for s in started:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGCONT)
            s.stop()
        hosts.close()
