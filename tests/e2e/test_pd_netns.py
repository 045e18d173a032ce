"""Prefill/decode disaggregation across separate hosts: `deepinfer router` in the root namespace in
front of 2 prefill and 2 decode workers, each in its own network namespace behind a veth (pd_netns),
the KV moved by UCX over TCP on those veths. Greedy outputs equal a single `--role both` server's,
streamed and not, with KV really moved; with delay and loss on a prefill worker's link (`tc netem`,
or nftables drops and a `tc tbf` limit where the kernel lacks netem)
every request completes with the right output or a clear 503 within its timeout; a SIGSTOPped
prefill worker and a SIGKILLed decode worker while requests run end every request within bounds
and later requests are served right; the DeepSeek-V4 fixture's four KV kinds cross the same way. Afterwards no worker holds a pinned block and every KV pool
is idle (read from /metrics). Skipped, with the reason, where namespaces cannot be made."""
import concurrent.futures
import shutil
import signal
import time

import pytest

import pd_netns
from pd_cluster import (BLOCK, REQUEST_TIMEOUT_S, all_released, assert_bounded, client_of, completion, hosts_cluster,
                        long_prompt, pd_metric, post)
from server import ROOT, Server

PD_TIMEOUT_S = 5

why_not = pd_netns.unavailable()
pytestmark = pytest.mark.skipif(why_not is not None, reason=f"network namespaces unavailable: {why_not}")


@pytest.fixture(scope="module")
def cluster(deepinfer_bin, model_dir, tmp_path_factory):
    with hosts_cluster(deepinfer_bin, model_dir, tmp_path_factory.mktemp("netns"), pd_timeout_s=PD_TIMEOUT_S) as c:
        yield c


@pytest.fixture(scope="module")
def both(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, *BLOCK)
    yield s
    assert s.stop() == 0, "".join(s.log)


def moved(decodes):
    return sum(pd_metric(d, "deepinfer_pd_transfers_total", "decode") for d in decodes)


def body(i, max_tokens=8):
    return {"model": "tiny", "prompt": long_prompt(i), "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}


@pytest.mark.parametrize("stream", [False, True])
def test_outputs_across_hosts_equal_a_single_server(cluster, both, stream):
    hosts, prefills, decodes, router = cluster
    via_router, single = client_of(router.base), client_of(both.base)
    before = moved(decodes)
    bytes_before = sum(pd_metric(d, "deepinfer_pd_bytes_moved_total", "decode") for d in decodes)
    rx_before = hosts.rx_bytes(2) + hosts.rx_bytes(3)
    for i in range(4):
        kwargs = dict(model="tiny", prompt=long_prompt(300 + i + 10 * stream), max_tokens=10, temperature=0,
                      extra_body={"ignore_eos": True})
        if not stream:
            kwargs["logprobs"] = 2
        assert completion(via_router, stream, **kwargs) == completion(single, stream, **kwargs)
    assert moved(decodes) >= before + 4
    kv_bytes = sum(pd_metric(d, "deepinfer_pd_bytes_moved_total", "decode") for d in decodes) - bytes_before
    assert 0 < kv_bytes <= hosts.rx_bytes(2) + hosts.rx_bytes(3) - rx_before  # the KV came over the veths
    all_released(prefills, decodes)


def test_delay_and_loss_on_a_prefill_link_end_every_request(cluster, both):
    hosts, prefills, decodes, router = cluster
    prompts = list(range(400, 408))  # distinct prompts: about half hash to the lossy worker
    want = {i: post(both.base, body(i), False)[1:] for i in prompts}
    granted_before = pd_metric(prefills[0], "deepinfer_pd_transfers_total", "prefill")
    applied = hosts.impair(0)
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = {i: pool.submit(post, router.base, body(i), i % 2 == 1) for i in prompts}
            outcomes = {i: f.result(timeout=REQUEST_TIMEOUT_S + 30) for i, f in futures.items()}
    finally:
        hosts.clear_impairment(0)
    for i, outcome in outcomes.items():
        assert_bounded(outcome, want[i], applied)
    assert sum(o[1] is not None for o in outcomes.values()) >= len(prompts) // 2, outcomes
    assert pd_metric(prefills[0], "deepinfer_pd_transfers_total", "prefill") > granted_before  # it was on the path
    all_released(prefills, decodes)


def test_stopped_prefill_and_killed_decode_end_every_request(cluster, both):
    hosts, prefills, decodes, router = cluster
    prompts = list(range(500, 508))
    want = {i: post(both.base, body(i, 48), False)[1:] for i in prompts}
    stopped, killed = prefills[0], decodes[1]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = {i: pool.submit(post, router.base, body(i, 48), i % 2 == 1) for i in prompts}
        time.sleep(0.5)
        stopped.proc.send_signal(signal.SIGSTOP)
        killed.proc.send_signal(signal.SIGKILL)
        killed.proc.wait()
        outcomes = {i: f.result(timeout=REQUEST_TIMEOUT_S + 30) for i, f in futures.items()}
    for i, outcome in outcomes.items():
        assert_bounded(outcome, want[i])
    # With the prefill worker still stopped, later requests are served right by the survivors.
    for i in range(510, 514):
        assert post(router.base, body(i), False)[1:] == post(both.base, body(i), False)[1:]
    stopped.proc.send_signal(signal.SIGCONT)
    all_released(prefills, decodes[:1])


def test_deepseek_v4_across_hosts_equals_a_single_server(deepinfer_bin, tmp_path_factory):
    """The V4 fixture's four KV kinds (windows, compressed entries) cross the veths the same way."""
    model = tmp_path_factory.mktemp("netns-v4") / "tiny-v4"
    model.mkdir()
    for f in (ROOT / "tests" / "data" / "models" / "tiny-v4").iterdir():
        shutil.copy(f, model / f.name)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ROOT / "tests" / "data" / "tokenizers" / "deepseek-v4" / name, model / name)
    single = Server(deepinfer_bin, model, *BLOCK)
    try:
        with hosts_cluster(deepinfer_bin, model, tmp_path_factory.mktemp("netns"),
                           pd_timeout_s=PD_TIMEOUT_S) as (_, prefills, decodes, router):
            before = moved(decodes)
            for i in range(4):
                ids = {**body(0), "prompt": [100 + (k * 37 + i * 11) % 900 for k in range(60)]}  # V4's vocabulary: 1024
                want = post(single.base, ids, i % 2 == 1)
                assert want[1] is not None, want
                assert post(router.base, ids, i % 2 == 1) == want
            assert moved(decodes) >= before + 4
            all_released(prefills, decodes)
    finally:
        assert single.stop() == 0, "".join(single.log)
