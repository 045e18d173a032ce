"""`deepinfer serve --expert-parallel N` under mpirun, with the official `openai` client: every
rank serves its own port, and what rank 0 (and the others) answer equals a single server's,
greedy and seeded, streaming, concurrently on all ranks; a rank stopped (SIGSTOP) or killed
(SIGKILL, with mpirun --enable-recovery) mid-request makes the others fail the request cleanly
and /health answer 503 within --ep-timeout plus a margin, and every wait here is bounded."""
import concurrent.futures
import os
import re
import signal
import urllib.request
import sys
import time

import openai
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
from ep_server import MPIRUN, EpServer, health  # noqa: E402
from server import Server, make_model  # noqa: E402

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun is missing (scripts/setup.sh installs openmpi-bin)")

EP_TIMEOUT = 3


def http_get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()
PROMPTS = ["The capital of France is", "1, 2, 3,", "hello world", "Once upon a time"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("ep-serve") / "tiny")


def client(base):
    return openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=60, max_retries=0)


def answers(c):
    out = []
    for i, prompt in enumerate(PROMPTS):
        r = c.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0, logprobs=2,
                                 extra_body={"ignore_eos": True})
        out.append((r.choices[0].text, r.choices[0].logprobs.token_logprobs, r.choices[0].logprobs.top_logprobs))
        r = c.completions.create(model="tiny", prompt=prompt, max_tokens=10, temperature=0.9, seed=100 + i, n=2)
        out.append([ch.text for ch in r.choices])
    chat = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Say hi"}], max_tokens=10,
                                     temperature=0, extra_body={"ignore_eos": True})
    out.append(chat.choices[0].message.content)
    stream = c.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=8, temperature=0, stream=True,
                                  extra_body={"ignore_eos": True})
    out.append("".join(ch.choices[0].text for ch in stream if ch.choices))
    return out


@pytest.fixture(scope="module")
def want(deepinfer_bin, model):
    single = Server(deepinfer_bin, model)
    try:
        return answers(client(single.base))
    finally:
        single.proc.send_signal(signal.SIGTERM)
        single.proc.wait(timeout=60)


def test_every_rank_answers_as_a_single_server(deepinfer_bin, model, want):
    ep = EpServer(deepinfer_bin, model, 2, "--ep-timeout", "30")
    try:
        assert answers(client(ep.base(0))) == want
        # Both ranks at once: each one's requests share steps with the other's MoE work.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(answers, client(ep.base(r))) for r in (0, 1, 0, 1)]
            for f in futures:
                assert f.result(timeout=300) == want
    finally:
        ep.stop()
    # Every rank drained and stopped (mpirun itself exits 1 when it is signalled).
    assert sum(line.strip() == "deepinfer: stopped" for line in ep.log) == 2, "".join(ep.log)


def metric_values(text, name):
    return {labels: float(v) for labels, v in re.findall(r"^" + name + r"(\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)}


def test_eplb_while_serving_keeps_answers_and_reports_loads(deepinfer_bin, model, want):
    """Experts move every 3 steps (18 slots for 16 experts over 2 ranks) while requests run;
    answers stay those of a single server, and /metrics reports loads per expert and rank."""
    ep = EpServer(deepinfer_bin, model, 2, "--ep-timeout", "30", "--eplb-redundant-experts", "2", "--eplb-interval", "3")
    try:
        assert answers(client(ep.base(0))) == want
        status, text = http_get(ep.base(0) + "/metrics")
        assert status == 200
    finally:
        ep.stop()
    assert metric_values(text, "deepinfer_ep_rebalances_total")[""] >= 1
    routed = metric_values(text, "deepinfer_ep_expert_tokens_total")
    assert len(routed) == 16 * 2 and sum(routed.values()) > 0  # 2 MoE layers of 16 experts
    copies = metric_values(text, "deepinfer_ep_expert_copies")
    assert sum(copies.values()) == 18 * 2 and min(copies.values()) >= 1
    per_rank = metric_values(text, "deepinfer_ep_window_rank_tokens")
    assert {k for k in per_rank if 'rank="1"' in k} and sum(per_rank.values()) > 0
    assert metric_values(text, "deepinfer_ep_rank_rows_total")['{rank="0"}'] > 0


def long_request(base):
    return client(base).completions.create(model="tiny", prompt="tell me a story", max_tokens=4000, temperature=0,
                                           extra_body={"ignore_eos": True})


def fail_rank_mid_request(ep, how):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(long_request, ep.base(0))
        time.sleep(1.0)  # the request is decoding, in lockstep with rank 1
        assert not running.done()
        os.kill(ep.pid(1), how)
        failed_at = time.time()
        with pytest.raises(openai.APIError):
            running.result(timeout=EP_TIMEOUT + 30)
        assert time.time() - failed_at < EP_TIMEOUT + 10
    deadline = failed_at + EP_TIMEOUT + 10
    while health(ep.base(0)) != 503:
        assert time.time() < deadline, "rank 0 never reported unhealthy: " + "".join(ep.log)
        time.sleep(0.1)
    with pytest.raises(openai.APIStatusError) as e:
        client(ep.base(0)).completions.create(model="tiny", prompt="hi", max_tokens=2)
    assert e.value.status_code == 503
    assert any("did not complete" in line and "rank 0" in line for line in ep.log), "".join(ep.log)


def test_a_stopped_rank_fails_requests_and_health(deepinfer_bin, model):
    ep = EpServer(deepinfer_bin, model, 2, "--ep-timeout", str(EP_TIMEOUT))
    try:
        fail_rank_mid_request(ep, signal.SIGSTOP)
        os.kill(ep.pid(1), signal.SIGCONT)
    finally:
        ep.stop()


def test_a_killed_rank_fails_requests_and_health_with_recovery_enabled(deepinfer_bin, model):
    """Without --enable-recovery, mpirun ends the whole job when a rank dies (clients see their
    connections close); with it the survivors keep answering, 503."""
    ep = EpServer(deepinfer_bin, model, 2, "--ep-timeout", str(EP_TIMEOUT), mpirun_args=["--enable-recovery"])
    try:
        fail_rank_mid_request(ep, signal.SIGKILL)
    finally:
        ep.stop()


def test_a_killed_rank_without_recovery_ends_the_job_without_hanging(deepinfer_bin, model):
    """OpenMPI's default: when a rank dies, mpirun ends every rank. The running request's
    connection closes (an error for the client, never a hang) and the whole job is gone soon after."""
    ep = EpServer(deepinfer_bin, model, 2, "--ep-timeout", str(EP_TIMEOUT))
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(long_request, ep.base(0))
            time.sleep(1.0)
            assert not running.done()
            os.kill(ep.pid(1), signal.SIGKILL)
            with pytest.raises(openai.APIError):
                running.result(timeout=60)
        ep.proc.wait(timeout=60)  # mpirun exits by itself
        assert health(ep.base(0)) is None  # nobody listens any more
    finally:
        ep.stop()


def test_the_router_in_front_places_requests_on_every_rank(deepinfer_bin, model, want):
    """One endpoint for the group: `deepinfer router` with the ranks as its decode workers sends each
    request to the least loaded rank (they compute prompts themselves: no prefill worker is used);
    answers stay a single server's."""
    import subprocess
    ep = EpServer(deepinfer_bin, model, 2, "--ep-timeout", "30")
    router = None
    try:
        router = subprocess.Popen([deepinfer_bin, "router", "--prefill", ep.base(0), "--decode",
                                   f"{ep.base(0)},{ep.base(1)}", "--port", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = router.stderr.readline()
        m = re.search(r"router listening on (http://[\d.]+:\d+)", line)
        assert m, line
        base = m.group(1)
        deadline = time.time() + 60
        while health(base) != 200:
            assert time.time() < deadline
            time.sleep(0.1)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            for result in [pool.submit(answers, client(base)) for _ in range(4)]:
                assert result.result(timeout=300) == want
        served = []
        for rank in (0, 1):
            _, text = http_get(ep.base(rank) + "/metrics")
            served.append(sum(metric_values(text, "deepinfer_requests_total").get(k, 0) for k in
                              ('{endpoint="/v1/completions",status="200"}', '{endpoint="/v1/chat/completions",status="200"}')))
        assert min(served) > 0, served  # both ranks got requests
    finally:
        if router is not None:
            router.send_signal(signal.SIGTERM)
            router.wait(timeout=60)
        ep.stop()
