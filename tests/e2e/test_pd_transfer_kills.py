"""kill -9 at chosen points inside a KV transfer, on router + 2 prefill + 2 decode workers as
separate hosts (pd_netns). What the prefill hosts send is rate-limited (`tc tbf`), so a decode
worker's UCX read of a ~570 KB prompt takes seconds and the test acts while it runs, seen from
outside: the prefill worker holds the granted blocks (its /metrics), the decode host's TCP
connections with it other than HTTP (UCX's) have received part of the KV (`ss`), the decode
worker's read has not returned (its read counters). Points:
- the prefill worker killed while the decode worker reads its blocks: the read fails (the decode
  worker's read failures count it), the router retries on the other prefill worker and the client
  gets the right output;
- the decode worker killed while its read runs, and killed after its read returned but before its
  release reached the prefill worker (the prefill host drops the decode hosts' packets to its HTTP
  port from the grant on, so the release waits): the client gets a clear error (502), or the right
  output where the router re-sent the request on finding its kept-alive connection dead; the
  prefill worker's lease on the blocks expires (counted) and it holds nothing.
Every request ends within its timeout, later requests are served right by the survivors, and no
surviving worker holds a pinned block or a used KV block afterwards (read from /metrics)."""
import concurrent.futures
import time

import pytest

import pd_netns
from pd_cluster import BLOCK, REQUEST_TIMEOUT_S, all_released, hosts_cluster, pd_metric, post
from server import Server

RATE = "1mbit"            # what a prefill host sends: ~125 KB/s
LEASE_S = 15              # the prefill workers' lease: longer than a rate-limited read (~5 s)
PD_TIMEOUT_S = 40         # the decode workers' bound on a whole remote prefill
KV_BYTES = 37 * 16 * 960  # the prompt's leading whole blocks on the tiny DeepSeek-V3 (605 tokens)

why_not = pd_netns.unavailable()
pytestmark = pytest.mark.skipif(why_not is not None, reason=f"network namespaces unavailable: {why_not}")


@pytest.fixture(scope="module")
def both(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, *BLOCK)
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture
def cluster(deepinfer_bin, model_dir, tmp_path):
    # A small socket send buffer keeps most of a read's bytes in the prefill worker's UCX, not in
    # its kernel, so killing it cuts the read (a kernel goes on sending a dead process's buffers).
    with hosts_cluster(deepinfer_bin, model_dir, tmp_path, pd_timeout_s=PD_TIMEOUT_S, lease_s=LEASE_S,
                       prefill_env=["UCX_TCP_SNDBUF=65536"]) as c:
        yield c


def body(i):
    prompt = f"Transfer {i}. " + " ".join(f"word{(i * 31 + k * 7) % 97}" for k in range(300))  # 605 tokens
    return {"model": "tiny", "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True}


def reads(decode):
    """(read seconds, read failures) of a decode worker (one /metrics page): the first moves when a
    read returns."""
    text = decode.get("/metrics")[1]
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return tuple(float(values[f'deepinfer_pd_read_{n}_total{{role="decode"}}']) for n in ("seconds", "failures"))


def read_in_flight(hosts, prefills, decodes, before, on_read=None):
    """Waits until a decode worker's read of a prefill worker's blocks has moved at least 32 KB (on
    its UCX connections with that prefill host, `ss`) and not yet returned; (prefill index, decode
    index). `on_read(prefill index)` runs once, as soon as any KV arrives from a prefill host
    (its grant has been answered by then)."""
    http_ports = [w.port for w in prefills + decodes]
    address = {hosts.addr(i): i for i in range(len(prefills))}
    deadline = time.time() + 60
    started, seen = False, None
    while time.time() < deadline:
        for j, d in enumerate(decodes):
            seen = hosts.tcp_received(2 + j, http_ports)
            for peer, moved in seen.items():
                if peer not in address or moved == 0:
                    continue
                if not started and on_read:
                    on_read(address[peer])
                started = True
                if 32 << 10 <= moved < KV_BYTES * 6 // 10 and reads(d) == before[j]:
                    return address[peer], j
        time.sleep(0.02)
    raise AssertionError(f"no read in flight within 60 s: UCX bytes received by the last decode host {seen}")


def test_prefill_killed_while_its_blocks_are_read(cluster, both):
    hosts, prefills, decodes, router = cluster
    want = post(both.base, body(1), False)[1:]
    before = [reads(d) for d in decodes]
    for i in (0, 1):
        hosts.limit_rate(i, RATE)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(post, router.base, body(1), True)
        victim, reader = read_in_flight(hosts, prefills, decodes, before)
        prefills[victim].proc.kill()
        prefills[victim].proc.wait()
        for i in (0, 1):
            hosts.clear_impairment(i)
        outcome = future.result(timeout=REQUEST_TIMEOUT_S)
    assert outcome == (200, *want), outcome  # retried on the other prefill worker
    failures = reads(decodes[reader])[1]  # the kill cut the read itself
    assert failures == before[reader][1] + 1, (reader, [reads(d) for d in decodes], "".join(decodes[reader].log))
    assert router.metric("deepinfer_router_prefill_retries_total") >= 1
    all_released([prefills[1 - victim]], decodes)


@pytest.mark.parametrize("point", ["during_read", "before_release"])
def test_decode_killed_inside_a_transfer(cluster, both, point):
    hosts, prefills, decodes, router = cluster
    want = post(both.base, body(2), False)[1:]
    before = [reads(d) for d in decodes]
    expired = [pd_metric(p, "deepinfer_pd_leases_expired_total", "prefill") for p in prefills]
    for i in (0, 1):
        hosts.limit_rate(i, RATE)

    def hold_releases(i):  # from its grant on, the decode hosts' control messages to it are dropped
        hosts.block_port(i, prefills[i].port, [hosts.addr(2), hosts.addr(3)])

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(post, router.base, body(2), False)
        granter, reader = read_in_flight(hosts, prefills, decodes, before,
                                         hold_releases if point == "before_release" else None)
        if point == "before_release":  # the read returns, well; the release cannot get through
            deadline = time.time() + 60
            while reads(decodes[reader]) == before[reader]:
                assert time.time() < deadline, "the read did not return"
                time.sleep(0.02)
            assert reads(decodes[reader])[1] == before[reader][1]  # and it succeeded
        decodes[reader].proc.kill()
        decodes[reader].proc.wait()
        for i in (0, 1):
            hosts.clear_impairment(i)
        status, text, finish = future.result(timeout=REQUEST_TIMEOUT_S)
    if text is not None:  # the router sent it again (its connection to the worker was a reused one)
        assert (status, text, finish) == (200, *want)
    else:
        assert status >= 500 and finish["error"]["message"], (status, finish)
    # The decode worker never released: the lease ends and the prefill worker unpins the blocks.
    deadline = time.time() + LEASE_S + 30
    while pd_metric(prefills[granter], "deepinfer_pd_leases_expired_total", "prefill") == expired[granter]:
        assert time.time() < deadline, "the lease did not expire"
        time.sleep(0.1)
    survivor = decodes[1 - reader]
    for i in range(3):  # later requests are served right by the survivors
        assert post(router.base, body(10 + i), i % 2 == 1) == (200, *post(both.base, body(10 + i), False)[1:])
    all_released(prefills, [survivor])
