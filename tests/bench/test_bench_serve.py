"""`deepinfer bench serve` against the stub server, whose timings are known in advance: the
reported percentiles and throughputs must equal the values those timings imply.

Known values are computed here independently of the benchmark (numpy's linear percentiles over
what the stub was configured to do). The tolerances cover the stub's timer and the loopback
(well under a millisecond on an idle machine; a few milliseconds of scheduling delay on a
loaded 2-core one)."""
import json

import numpy as np
import pytest

TIME_TOL_MS = 5.0


# A loaded machine delays a few responses by tens of milliseconds (one late thread wake-up is
# one sample of the p99): the tails may exceed what the stub was told by up to this much, never
# fall short of it.
TAIL_SLACK_MS = 60.0


def close(actual, expected, rel=0.02, abs_ms=TIME_TOL_MS):
    return abs(actual - expected) <= max(abs_ms, rel * abs(expected))


def tail_close(actual, expected):
    return expected - TIME_TOL_MS <= actual <= expected + TAIL_SLACK_MS


def on_schedule(sent, scheduled):
    """Open-loop sends keep an absolute schedule: each is at its time or late by one wake-up of a
    loaded machine (which does not delay the ones after it), never early; most are on time."""
    sent, scheduled = np.asarray(sent), np.asarray(scheduled)
    late = sent - scheduled
    return bool(np.all(late >= -TIME_TOL_MS / 1000) and np.all(late <= TAIL_SLACK_MS / 1000)
                and np.median(np.abs(late)) <= TIME_TOL_MS / 1000)


def expected_gaps(n_out, itl_ms, stall_every, stall_ms):
    """The stub's gaps between output tokens 1..n_out-1: every stall_every-th is stall_ms longer."""
    return [itl_ms + (stall_ms if stall_every and k % stall_every == 0 else 0) for k in range(1, n_out)]


def test_known_timings_give_known_percentiles(stub, bench_serve):
    ttft, prefill, itl, stall_every, stall = 40.0, 0.2, 10.0, 5, 20.0
    url = stub(ttft_ms=ttft, prefill_ms_per_token=prefill, itl_ms=itl, stall_every=stall_every, stall_ms=stall)
    n_out = 20
    report, records = bench_serve(url, "--input-len", "uniform:50:150", "--output-len", n_out,
                                  "--num-requests", 48, "--concurrency", 8, "--seed", 3)
    (run,) = report["runs"]
    assert run["requests"] == {"completed": 48, "failed": 0, "errors": {}, "without_usage": 0}
    assert run["tokens"]["output"] == 48 * n_out
    assert len(records) == 48

    # TTFT: the stub's fixed part plus prefill per prompt token (usage tells the prompt length).
    ttfts = [ttft + prefill * r["tokens_in"] for r in records]
    gaps = expected_gaps(n_out, itl, stall_every, stall)
    itls = gaps * len(records)
    tpot = sum(gaps) / (n_out - 1)
    for key, values in [("ttft_ms", ttfts), ("itl_ms", itls), ("e2e_ms", [t + sum(gaps) for t in ttfts])]:
        assert close(run[key]["median"], np.median(values)), (key, run[key]["median"], np.median(values))
        for stat, q in [("p90", 90), ("p99", 99)]:
            expected = np.percentile(values, q)
            assert tail_close(run[key][stat], expected), (key, stat, run[key][stat], expected)
        assert close(run[key]["mean"], np.mean(values), abs_ms=TIME_TOL_MS + TAIL_SLACK_MS / 8), (key, run[key]["mean"])
    assert close(run["tpot_ms"]["median"], tpot, abs_ms=TIME_TOL_MS / (n_out - 1))
    assert 1000 / run["user_output_tokens_per_s"]["p50"] == pytest.approx(tpot, abs=TIME_TOL_MS / (n_out - 1))

    # Throughput is what the records say, over the run's duration.
    duration = max(r["t_sent_s"] + r["e2e_s"] for r in records)
    assert run["duration_s"] == pytest.approx(duration, abs=0.01)
    assert run["throughput"]["output_tokens_per_s"] == pytest.approx(48 * n_out / run["duration_s"], rel=1e-6)


def test_fixed_lengths_give_known_throughput(stub, bench_serve):
    """Equal requests at concurrency C go in waves of C: each wave takes TTFT + the gaps."""
    ttft, itl, n_out, c, waves = 30.0, 10.0, 41, 8, 4
    url = stub(ttft_ms=ttft, itl_ms=itl)
    report, _ = bench_serve(url, "--input-len", 64, "--output-len", n_out, "--num-requests", c * waves,
                            "--concurrency", c, "--gpus", 2)
    (run,) = report["runs"]
    wave_s = (ttft + itl * (n_out - 1)) / 1000
    # The stub cannot be faster than told; a loaded machine makes it slower (late wake-ups add up
    # over the waves), so the duration is bounded on both sides and the rates follow from it.
    assert waves * wave_s * 0.98 <= run["duration_s"] <= waves * wave_s * 1.25 + TAIL_SLACK_MS / 1000
    duration = run["duration_s"]
    assert run["throughput"]["requests_per_s"] == pytest.approx(c * waves / duration, rel=1e-6)
    assert run["throughput"]["output_tokens_per_s"] == pytest.approx(c * waves * n_out / duration, rel=1e-6)
    assert run["throughput"]["total_tokens_per_s"] == pytest.approx(c * waves * (64 + n_out) / duration, rel=1e-6)
    assert run["throughput"]["output_tokens_per_s_per_gpu"] == pytest.approx(run["throughput"]["output_tokens_per_s"] / 2)
    # Per-user speed is 1000 / TPOT. The stub sends token k at its first token's time + k * ITL, so a
    # late first chunk (one late wake-up) shortens that request's decode window and a late last one
    # lengthens it: the fast and slow tails may miss ITL by a wake-up, the median may not.
    for stat in ["p10", "p50", "p90"]:
        tpot_ms = 1000 / run["user_output_tokens_per_s"][stat]
        below = TIME_TOL_MS if stat == "p50" else TAIL_SLACK_MS
        assert itl - below / (n_out - 1) <= tpot_ms <= itl + TAIL_SLACK_MS / (n_out - 1), stat


def test_sweep_runs_each_concurrency_with_its_own_prompts(stub, bench_serve):
    url = stub(ttft_ms=5, itl_ms=2, kv_slots=32)
    report, records = bench_serve(url, "--input-len", 40, "--output-len", 5, "--requests-per-user", 2,
                                  "--concurrency", "1,4,16", "--metrics-interval", 0.02)
    assert [r["label"] for r in report["runs"]] == ["c=1", "c=4", "c=16"]
    assert [r["requests"]["completed"] for r in report["runs"]] == [2, 8, 32]
    assert [r["load"]["concurrency"] for r in report["runs"]] == [1, 4, 16]
    # Fresh prompts in every run: no prefix-cache hit carries over between runs.
    for run in report["runs"]:
        assert run["server"]["prefix_cache_hit_rate"] == 0
        assert run["server"]["kv_cache_usage_max"] <= run["load"]["concurrency"] / 32
    # The peak is what a scrape happens to see: all 16 at once on an idle machine, fewer when a
    # loaded one delays the scrapes or the requests; never more.
    assert 0 < report["runs"][2]["server"]["kv_cache_usage_max"] <= 16 / 32


def test_prefix_cache_hit_rate_is_scraped(stub, bench_serve):
    url = stub(ttft_ms=5, itl_ms=2, block_tokens=16)
    groups, prefix, suffix, n = 4, 256, 100, 32
    report, _ = bench_serve(url, "--workload", "shared-prefix", "--prefix-groups", groups, "--prefix-len", prefix,
                            "--input-len", suffix, "--output-len", 4, "--num-requests", n, "--concurrency", 4)
    (run,) = report["runs"]
    # Every request but each group's first finds its whole prefix (a multiple of the block size).
    assert run["server"]["prefix_cache_hit_rate"] == pytest.approx((n - groups) * prefix / (n * (prefix + suffix)))
    assert run["tokens"]["input"] == n * (prefix + suffix)


def test_metrics_missing_is_reported_not_fatal(stub, bench_serve):
    url = stub(ttft_ms=5, itl_ms=2)
    report, _ = bench_serve(url, "--num-requests", 4, "--input-len", 10, "--output-len", 3, "--metrics-path", "/nope")
    (run,) = report["runs"]
    assert run["requests"]["completed"] == 4
    assert run["server"]["prefix_cache_hit_rate"] is None
    assert "http_404" in run["server"]["note"]


def test_agentic_sessions_follow_their_script(stub, bench_serve, tmp_path, deepinfer_bin):
    import subprocess
    url = stub(ttft_ms=5, itl_ms=2, block_tokens=16)
    args = ["--workload", "agentic", "--num-requests", 6, "--system-len", 400, "--input-len", 60, "--turns", "uniform:2:4",
            "--tool-result-len", "uniform:20:60", "--output-len", "uniform:5:15", "--think-time", "uniform:0.02:0.08",
            "--seed", 11]
    dump = tmp_path / "agentic.jsonl"
    subprocess.run([deepinfer_bin, "bench", "serve", "--base-url", url, "--model", "stub", "--dump-workload", dump,
                    *map(str, args)], check=True, timeout=60)
    script = [json.loads(line) for line in dump.read_text().splitlines()]
    report, records = bench_serve(url, *args, "--concurrency", 3)
    (run,) = report["runs"]
    assert run["load"]["api"] == "chat"
    assert run["requests"]["completed"] == len(script) == len(records)
    by_turn = {(r["conversation"], r["turn"]): r for r in records}
    for line in script:
        rec = by_turn[(line["conversation"], line["turn"])]
        assert rec["tokens_in"] == line["input_tokens"]
        assert rec["tokens_out"] == line["output_tokens"]
        nxt = by_turn.get((line["conversation"], line["turn"] + 1))
        if nxt:  # the next turn waits for this answer plus its think time
            waited = nxt["t_sent_s"] - (rec["t_sent_s"] + rec["e2e_s"])
            assert waited == pytest.approx(line["think_time_s"], abs=TIME_TOL_MS / 1000)
    # Each turn re-sends the previous prompt: most of the input is a cached prefix.
    assert run["server"]["prefix_cache_hit_rate"] > 0.6


def test_request_rate_spaces_arrivals(stub, bench_serve):
    url = stub(ttft_ms=5, itl_ms=2)
    report, records = bench_serve(url, "--request-rate", 50, "--arrival", "constant", "--num-requests", 20,
                                  "--input-len", 10, "--output-len", 3)
    assert report["runs"][0]["load"] == {"mode": "rate", "request_rate": 50.0, "arrival": "constant",
                                         "max_concurrency": 0, "api": "completions"}
    sent = sorted(r["t_sent_s"] for r in records)
    assert on_schedule(sent, 0.02 * np.arange(20)), sent

    # Poisson arrivals are random but fixed by the seed.
    _, first = bench_serve(url, "--request-rate", 100, "--num-requests", 20, "--input-len", 10, "--output-len", 3, "--seed", 5)
    _, again = bench_serve(url, "--request-rate", 100, "--num-requests", 20, "--input-len", 10, "--output-len", 3, "--seed", 5)
    a, b = sorted(r["t_sent_s"] for r in first), sorted(r["t_sent_s"] for r in again)
    apart = np.abs(np.subtract(a, b))
    assert np.all(apart <= TAIL_SLACK_MS / 1000) and np.median(apart) <= TIME_TOL_MS / 1000, (a, b)
    assert np.std(np.diff(a)) > 0.002


def test_max_concurrency_caps_requests_in_flight(stub, bench_serve):
    url = stub(ttft_ms=20, itl_ms=5)
    _, records = bench_serve(url, "--request-rate", 1000, "--max-concurrency", 3, "--num-requests", 12,
                             "--input-len", 10, "--output-len", 4)
    events = sorted([(r["t_sent_s"], 1) for r in records] + [(r["t_sent_s"] + r["e2e_s"], -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    in_flight = np.cumsum([d for _, d in events])
    assert in_flight.max() == 3


def test_trace_replay_at_its_timestamps(stub, bench_serve, tmp_path):
    url = stub(ttft_ms=5, itl_ms=2, block_tokens=16)
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(line) for line in [
        {"timestamp": 0, "input_length": 64, "output_length": 3, "hash_ids": [1, 2]},
        {"timestamp": 100, "input_length": 64, "output_length": 3, "hash_ids": [1, 2]},
        {"timestamp": 250, "input_length": 64, "output_length": 3, "hash_ids": [3, 4]},
    ]) + "\n")
    report, records = bench_serve(url, "--workload", "replay", "--trace", trace, "--trace-timing", "--trace-block-len", 32)
    (run,) = report["runs"]
    assert run["label"] == "trace"
    assert on_schedule(sorted(r["t_sent_s"] for r in records), [0, 0.1, 0.25])
    assert run["server"]["prefix_cache_hit_rate"] == pytest.approx(64 / 192)


def test_errors_are_counted_by_kind(stub, bench_serve):
    url = stub(ttft_ms=2, itl_ms=1, fail_every=4)
    report, _ = bench_serve(url, "--num-requests", 12, "--input-len", 10, "--output-len", 3, "--concurrency", 2, expect_rc=3)
    (run,) = report["runs"]
    assert run["requests"]["completed"] == 9
    assert run["requests"]["errors"] == {"http_500": 3}

    report, _ = bench_serve("http://127.0.0.1:9", "--num-requests", 3, "--input-len", 10, "--output-len", 3, expect_rc=3)
    assert report["runs"][0]["requests"]["errors"] == {"connect": 3}


def test_timeouts_end_the_run(stub, bench_serve):
    url = stub(ttft_ms=5000, itl_ms=1)
    report, _ = bench_serve(url, "--num-requests", 2, "--input-len", 10, "--output-len", 3, "--request-timeout", 0.3,
                            expect_rc=3)
    assert report["runs"][0]["requests"]["errors"] == {"timeout": 2}


def test_bad_arguments_are_reported(deepinfer_bin):
    import subprocess
    for args in [["--input-len", "uniform:9:1"], ["--workload", "replay"], ["--extra-body", "[1]"],
                 ["--concurrency", "0"]]:
        cmd = [deepinfer_bin, "bench", "serve", "--base-url", "http://127.0.0.1:9", "--model", "m", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stderr.startswith("error: "), proc.stderr
    for url in ["https://127.0.0.1:9", "http://127.0.0.1:port", "127.0.0.1:9"]:
        cmd = [deepinfer_bin, "bench", "serve", "--base-url", url, "--model", "m"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stderr.startswith("error: "), proc.stderr
