"""Prefill/decode workers end to end, on DeepSeek-V3 and DeepSeek-V4, without a router: a `--role prefill` and a `--role decode`
server on loopback, requests sent to the decode worker with X-DeepInfer-Prefill-Url as the router
sends them. Greedy and seeded outputs (with logprobs), streamed or not, must equal a single
`--role both` server's bitwise; the KV really moves (transfer counters); every block goes back
(pins and KV usage at zero on both sides); many remote prefills at once run on a set of threads
that --request-threads bounds; a dead or stalled prefill worker gives a 503 with X-DeepInfer-Retry: prefill within the
timeout and leaks nothing."""
import concurrent.futures
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from pd_cluster import BLOCK, pd_metric, wait_released  # noqa: E402
from server import Server, make_model  # noqa: E402

PD_TIMEOUT_S = 8


@pytest.fixture(scope="module", params=["tiny-v3", "tiny-v4"])
def model(request, tmp_path_factory):
    """A DeepSeek-V3 (one full-attention kind) and the DeepSeek-V4 fixture (sliding windows of
    three lookbacks and compressed entries: four kinds), each with its family's tokenizer."""
    out = tmp_path_factory.mktemp("pd") / request.param
    if request.param == "tiny-v3":
        return make_model(out)
    out.mkdir()
    for f in (ROOT / "tests" / "data" / "models" / "tiny-v4").iterdir():
        shutil.copy(f, out / f.name)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ROOT / "tests" / "data" / "tokenizers" / "deepseek-v4" / name, out / name)
    return out


@pytest.fixture(scope="module")
def both(deepinfer_bin, model):
    s = Server(deepinfer_bin, model, *BLOCK)
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def prefill(deepinfer_bin, model):
    s = Server(deepinfer_bin, model, *BLOCK, "--role", "prefill")
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def decode(deepinfer_bin, model):
    s = Server(deepinfer_bin, model, *BLOCK, "--role", "decode", "--pd-min-prefill-tokens", "20",
               "--pd-timeout", str(PD_TIMEOUT_S))
    yield s
    assert s.stop() == 0, "".join(s.log)


def post(base, body, headers=None, timeout=120):
    """(status, headers, raw body text)."""
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def prompt(n, salt):
    return [100 + (i * 37 + salt * 11) % 900 for i in range(n)]  # within both models' vocabularies


def outputs(text):
    """What must match bitwise: each choice's text, tokens' logprobs and finish reason."""
    j = json.loads(text)
    return [(c["index"], c["text"], c.get("logprobs"), c["finish_reason"]) for c in j["choices"]]


def streamed(text):
    """Each choice's text and finish reason from an SSE body."""
    texts, finish = {}, {}
    for line in text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for c in json.loads(line[6:])["choices"]:
            texts[c["index"]] = texts.get(c["index"], "") + c["text"]
            if c.get("finish_reason"):
                finish[c["index"]] = c["finish_reason"]
    return sorted((i, texts[i], finish.get(i)) for i in texts)


REQUESTS = [
    {"prompt": prompt(70, 1), "max_tokens": 12, "temperature": 0, "logprobs": 3},
    {"prompt": prompt(33, 2), "max_tokens": 8, "temperature": 0},
    {"prompt": prompt(120, 3), "max_tokens": 10, "temperature": 0.9, "seed": 7, "n": 2, "logprobs": 2},
    {"prompt": prompt(64, 4), "max_tokens": 6, "temperature": 0},   # 64 tokens: 3 whole blocks move, not 4
    {"prompt": prompt(70, 1)[:50] + prompt(40, 9), "max_tokens": 9, "temperature": 0},  # shares 3 blocks with the first
    {"prompt": prompt(12, 5), "max_tokens": 5, "temperature": 0},   # under --pd-min-prefill-tokens: computed on decode
]


def test_outputs_equal_a_single_server(both, prefill, decode):
    header = {"X-DeepInfer-Prefill-Url": prefill.base}
    moved_before = pd_metric(decode, "deepinfer_pd_blocks_moved_total", "decode")
    for body in REQUESTS:
        s1, _, want = post(both.base, {**body, "model": "tiny"})
        s2, _, got = post(decode.base, {**body, "model": "tiny"}, header)
        assert (s1, s2) == (200, 200), got
        assert outputs(got) == outputs(want), body
    assert pd_metric(decode, "deepinfer_pd_transfers_total", "decode") >= 5
    assert pd_metric(decode, "deepinfer_pd_local_prefills_total", "decode") >= 1
    moved = pd_metric(decode, "deepinfer_pd_blocks_moved_total", "decode") - moved_before
    assert moved > 0 and pd_metric(decode, "deepinfer_pd_bytes_moved_total", "decode") > 0
    assert pd_metric(prefill, "deepinfer_pd_blocks_moved_total", "prefill") >= moved
    assert pd_metric(decode, "deepinfer_pd_local_hit_blocks_total", "decode") >= 3, "decode's own prefix cache was used"
    assert 0 < pd_metric(decode, "deepinfer_pd_read_seconds_total", "decode") <= pd_metric(
        decode, "deepinfer_pd_transfer_seconds_total", "decode")
    wait_released([decode], "decode")
    wait_released([prefill], "prefill")


def test_streamed_outputs_equal_a_single_server(both, prefill, decode):
    header = {"X-DeepInfer-Prefill-Url": prefill.base}
    n_before = pd_metric(prefill, "deepinfer_pd_transfers_total", "prefill")
    for i, body in enumerate(REQUESTS[:3]):
        body = {**body, "model": "tiny", "prompt": prompt(len(body["prompt"]) + 5, 20 + i), "stream": True}
        s1, _, want = post(both.base, body)
        s2, h2, got = post(decode.base, body, header)
        assert (s1, s2) == (200, 200), got
        assert h2.get("Content-Type", "").startswith("text/event-stream")
        assert streamed(got) == streamed(want)
    assert pd_metric(prefill, "deepinfer_pd_transfers_total", "prefill") >= n_before + 3
    wait_released([decode], "decode")
    wait_released([prefill], "prefill")


def request_threads(server):
    """The server's threads named di-request: its request workers, where a remote prefill waits, and
    the threads they start (Asio's resolver for a control message's peer)."""
    n = 0
    for t in os.listdir(f"/proc/{server.proc.pid}/task"):
        try:
            with open(f"/proc/{server.proc.pid}/task/{t}/comm") as f:
                n += f.read().strip() == "di-request"
        except OSError:  # the thread ended meanwhile
            pass
    return n


def test_many_concurrent_remote_prefills_wait_on_the_bounded_request_workers(deepinfer_bin, model, both, prefill):
    """12 remote prefills at once on a decode worker with the default 2 request threads (and a
    timeout generous enough for a loaded machine): each ends with a single server's output, and the
    threads they wait on stay the 2 request workers, each with at most one resolver thread."""
    decode = Server(deepinfer_bin, model, *BLOCK, "--role", "decode", "--pd-min-prefill-tokens", "20",
                    "--pd-timeout", "120")
    try:
        header = {"X-DeepInfer-Prefill-Url": prefill.base}
        bodies = [{"model": "tiny", "prompt": prompt(50 + i, 200 + i), "max_tokens": 4, "temperature": 0}
                  for i in range(13)]
        want = [outputs(post(both.base, b)[2]) for b in bodies]
        assert outputs(post(decode.base, bodies[0], header)[2]) == want[0]
        assert request_threads(decode) == 2
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            futures = [pool.submit(post, decode.base, b, header) for b in bodies[1:]]
            most = 2
            while not all(f.done() for f in futures):
                most = max(most, request_threads(decode))
                time.sleep(0.01)
            got = [f.result(timeout=1) for f in futures]
        assert [(g[0], outputs(g[2])) for g in got] == [(200, w) for w in want[1:]]
        assert pd_metric(decode, "deepinfer_pd_transfers_total", "decode") == 13
        assert most <= 4, most  # bounded by --request-threads, not by the prefills at once
        wait_released([decode], "decode")
        wait_released([prefill], "prefill")
    finally:
        assert decode.stop() == 0, "".join(decode.log)


def test_a_repeated_prompt_is_a_prefix_hit_on_both_sides(prefill, decode):
    header = {"X-DeepInfer-Prefill-Url": prefill.base}
    body = {"model": "tiny", "prompt": prompt(90, 30), "max_tokens": 3, "temperature": 0}
    assert post(decode.base, body, header)[0] == 200
    hits = pd_metric(decode, "deepinfer_pd_local_hit_blocks_total", "decode")
    moved = pd_metric(decode, "deepinfer_pd_blocks_moved_total", "decode")
    assert post(decode.base, body, header)[0] == 200
    assert pd_metric(decode, "deepinfer_pd_local_hit_blocks_total", "decode") >= hits + 5  # (90 - 1) // 16, more with several kinds
    assert pd_metric(decode, "deepinfer_pd_blocks_moved_total", "decode") == moved


def test_a_bad_prefill_url_is_a_400(decode):
    status, _, text = post(decode.base, {"model": "tiny", "prompt": prompt(40, 1), "max_tokens": 2},
                           {"X-DeepInfer-Prefill-Url": "ftp://x"})
    assert status == 400
    assert "X-DeepInfer-Prefill-Url" in json.loads(text)["error"]["param"]


def test_an_unreachable_prefill_worker_is_a_retryable_503(decode):
    failures = pd_metric(decode, "deepinfer_pd_transfer_failures_total", "decode")
    status, headers, text = post(decode.base, {"model": "tiny", "prompt": prompt(40, 101), "max_tokens": 2},
                                 {"X-DeepInfer-Prefill-Url": "http://127.0.0.1:9"})
    assert status == 503, text
    assert headers.get("X-DeepInfer-Retry") == "prefill"
    assert json.loads(text)["error"]["code"] == "prefill_failed"
    assert pd_metric(decode, "deepinfer_pd_transfer_failures_total", "decode") == failures + 1
    wait_released([decode], "decode")


def test_a_killed_prefill_worker_is_a_retryable_503_and_nothing_leaks(deepinfer_bin, model, decode):
    victim = Server(deepinfer_bin, model, *BLOCK, "--role", "prefill")
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    start = time.time()
    status, headers, _ = post(decode.base, {"model": "tiny", "prompt": prompt(80, 102), "max_tokens": 2, "stream": True},
                              {"X-DeepInfer-Prefill-Url": victim.base})
    assert status == 503 and headers.get("X-DeepInfer-Retry") == "prefill"
    assert time.time() - start < PD_TIMEOUT_S + 10
    wait_released([decode], "decode")


def test_a_stalled_prefill_worker_times_out_and_its_lease_expires(deepinfer_bin, model, decode):
    victim = Server(deepinfer_bin, model, *BLOCK, "--role", "prefill", "--pd-lease", "2")
    try:
        victim.proc.send_signal(signal.SIGSTOP)
        start = time.time()
        status, headers, _ = post(decode.base, {"model": "tiny", "prompt": prompt(80, 103), "max_tokens": 2},
                                  {"X-DeepInfer-Prefill-Url": victim.base})
        assert status == 503 and headers.get("X-DeepInfer-Retry") == "prefill"
        assert PD_TIMEOUT_S - 1 < time.time() - start < PD_TIMEOUT_S + 10
        wait_released([decode], "decode")
        victim.proc.send_signal(signal.SIGCONT)
        # It computes and pins the prompt once resumed; nobody reads it, so the lease runs out.
        wait_released([victim], "prefill", timeout=60)
    finally:
        victim.proc.send_signal(signal.SIGCONT)
        assert victim.stop() == 0, "".join(victim.log)


def test_a_client_that_goes_away_frees_the_decode_side_at_once(deepinfer_bin, model, decode):
    victim = Server(deepinfer_bin, model, *BLOCK, "--role", "prefill", "--pd-lease", "2")
    try:
        victim.proc.send_signal(signal.SIGSTOP)  # the prefill never answers: only the client can end it
        start = time.time()
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            post(decode.base, {"model": "tiny", "prompt": prompt(80, 104), "max_tokens": 2},
                 {"X-DeepInfer-Prefill-Url": victim.base}, timeout=1)
        wait_released([decode], "decode")
        assert time.time() - start < PD_TIMEOUT_S - 1, "freed when the client went, not at the timeout"
        victim.proc.send_signal(signal.SIGCONT)
        wait_released([victim], "prefill", timeout=60)
    finally:
        victim.proc.send_signal(signal.SIGCONT)
        assert victim.stop() == 0, "".join(victim.log)


def test_a_layout_mismatch_is_refused_naming_it(deepinfer_bin, model, prefill):
    fp8 = Server(deepinfer_bin, model, *BLOCK, "--role", "decode", "--kv-cache-dtype", "fp8",
                 "--pd-min-prefill-tokens", "1")
    try:
        status, headers, text = post(fp8.base, {"model": "tiny", "prompt": prompt(40, 105), "max_tokens": 2},
                                     {"X-DeepInfer-Prefill-Url": prefill.base})
        assert status == 503 and headers.get("X-DeepInfer-Retry") == "prefill"
        assert "KV layout mismatch: the cache dtype" in json.loads(text)["error"]["message"]
        wait_released([fp8], "decode")
    finally:
        assert fp8.stop() == 0, "".join(fp8.log)


def test_roles_are_checked_at_start(deepinfer_bin, model):
    bad = subprocess.run([deepinfer_bin, "serve", "--model", str(model), "--port", "0", "--role", "router"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--role: 'router' is not prefill, decode or both" in bad.stderr
    no_cache = subprocess.run([deepinfer_bin, "serve", "--model", str(model), "--port", "0", "--role", "decode",
                               "--no-prefix-caching", "--kv-cache-memory", str(64 << 20)],
                              capture_output=True, text=True, timeout=120)
    assert no_cache.returncode != 0 and "drop --no-prefix-caching" in no_cache.stderr
