"""`deepinfer router` in front of real prefill and decode workers (`serve --role prefill|decode`,
the KV moved over UCX): through the official openai client, greedy outputs equal a single
`--role both` server's bitwise, streamed and not, chat and completions; the KV really moves; a
shared prefix goes to one prefill worker, whose prefix cache then serves it; a killed prefill
worker is retried on the other with the same output; and every block is released afterwards."""
import signal

import pytest

from pd_cluster import BLOCK, chat, client_of, completion, long_prompt, pd_metric, wait_released
from pd_router_helpers import Router
from server import Server

DECODE = [*BLOCK, "--role", "decode", "--pd-min-prefill-tokens", "20", "--pd-timeout", "8"]


@pytest.fixture(scope="module")
def both(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, *BLOCK)
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def prefills(deepinfer_bin, model_dir):
    ps = [Server(deepinfer_bin, model_dir, *BLOCK, "--role", "prefill") for _ in range(2)]
    yield ps
    for p in ps:
        assert p.stop() == 0, "".join(p.log)


@pytest.fixture(scope="module")
def decodes(deepinfer_bin, model_dir):
    ds = [Server(deepinfer_bin, model_dir, *DECODE) for _ in range(2)]
    yield ds
    for d in ds:
        assert d.stop() == 0, "".join(d.log)


@pytest.fixture(scope="module")
def router(deepinfer_bin, prefills, decodes):
    r = Router(deepinfer_bin, [p.base for p in prefills], [d.base for d in decodes])
    yield r
    assert r.stop() == 0, "".join(r.log)


@pytest.mark.parametrize("stream", [False, True])
def test_outputs_equal_a_single_server(router, both, prefills, decodes, stream):
    via_router, single = client_of(router.base), client_of(both.base)
    moved_before = sum(pd_metric(d, "deepinfer_pd_transfers_total", "decode") for d in decodes)
    for i in range(4):
        kwargs = dict(model="tiny", prompt=long_prompt(i + 10 * stream), max_tokens=10, temperature=0,
                      extra_body={"ignore_eos": True})
        if not stream:
            kwargs["logprobs"] = 2
        assert completion(via_router, stream, **kwargs) == completion(single, stream, **kwargs)
    system = "You answer in one short sentence. " * 6
    for question in ["What is the sea?", "Why is the sky blue?"]:
        kwargs = dict(model="tiny", messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
                      max_tokens=8, temperature=0)
        assert chat(via_router, stream, **kwargs) == chat(single, stream, **kwargs)
    assert sum(pd_metric(d, "deepinfer_pd_transfers_total", "decode") for d in decodes) >= moved_before + 4
    wait_released(decodes, "decode")
    wait_released(prefills, "prefill")


def test_a_shared_prefix_is_a_prefix_hit_on_its_prefill_worker(router, prefills, decodes):
    client = client_of(router.base)
    shared = long_prompt(99) + " " + long_prompt(98)
    hits_before = [p.metric("deepinfer_prefix_cache_hits_total") for p in prefills]
    for i in range(4):
        # Each ending is longer than --pd-min-prefill-tokens, so the decode worker sends it to a prefill
        # worker even when its own cache already holds the shared part (whichever decode worker the
        # router picks); the prefill worker then serves the shared part from its cache.
        client.completions.create(model="tiny", prompt=shared + f" ending {i}. " + long_prompt(200 + i), max_tokens=2,
                                  temperature=0)
    hits = [p.metric("deepinfer_prefix_cache_hits_total") - b for p, b in zip(prefills, hits_before)]
    assert sorted(hits)[0] == 0 and sorted(hits)[1] > 0, hits  # one prefill worker took them all, from its cache
    wait_released(decodes, "decode")
    wait_released(prefills, "prefill")


def test_a_killed_prefill_worker_is_retried_on_the_other(deepinfer_bin, model_dir, both, prefills, decodes):
    victim = Server(deepinfer_bin, model_dir, *BLOCK, "--role", "prefill")
    try:
        # Checks far apart: the router learns of the death from the decode workers' retry answers.
        r = Router(deepinfer_bin, [victim.base, prefills[0].base], [d.base for d in decodes], "--health-interval", "600")
    finally:
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
    try:
        via_router, single = client_of(r.base), client_of(both.base)
        for i in range(12):  # distinct prompts: about half hash to the dead worker
            kwargs = dict(model="tiny", prompt=long_prompt(200 + i), max_tokens=6, temperature=0)
            assert completion(via_router, False, **kwargs) == completion(single, False, **kwargs)
        assert r.metric("deepinfer_router_prefill_retries_total") >= 1
        assert r.metric("deepinfer_router_requests_total", endpoint="/v1/completions", outcome="success") == 12
    finally:
        assert r.stop() == 0, "".join(r.log)
    wait_released(decodes, "decode")
    wait_released(prefills, "prefill")
