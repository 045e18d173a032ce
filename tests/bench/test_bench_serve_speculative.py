"""`deepinfer bench serve` reports the server's speculative decoding figures: against a real
`deepinfer serve --speculative mtp` (a small random DeepSeek-V4 with its MTP block, which drafts at
every step until its acceptance switches it off), the run's draft and accepted tokens (in all and
per draft position) are exactly the change of the server's own /metrics counters over the run
(nothing else loads the server), and its accept length and rates follow from them; a server that
does not speculate reports zero drafts and no rates."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from server import Server  # noqa: E402


def spec_counters(server):
    status, text = server.get("/metrics")
    assert status == 200
    total = {}
    per_pos = {"draft": {}, "accepted": {}}
    for line in text.splitlines():
        m = re.match(r"deepinfer_spec_decode_(draft|accepted)_tokens_total (\d+)$", line)
        if m:
            total[m.group(1)] = int(m.group(2))
        m = re.match(r'deepinfer_spec_decode_(draft|accepted)_tokens_per_pos_total\{position="(\d+)"\} (\d+)$', line)
        if m:
            per_pos[m.group(1)][int(m.group(2))] = int(m.group(3))
    return total, per_pos


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("spec") / "tiny-v4"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_v4_checkpoint.py"), str(out), "--tokenizer",
                    str(ROOT / "tests" / "data" / "tokenizers" / "deepseek-v4")], check=True, capture_output=True,
                   timeout=300)
    return out


def run_bench(deepinfer_bin, server, tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([deepinfer_bin, "bench", "serve", "--base-url", server.base, "--model", "tiny", "--quiet",
                           "--output-json", str(out), "--num-requests", "8", "--concurrency", "2", "--input-len", "40",
                           "--output-len", "48", "--seed", "3"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = json.loads(out.read_text())["runs"]
    return run["server"]["speculative"], proc.stdout


def test_speculative_figures_are_the_servers_counters_over_the_run(deepinfer_bin, model_dir, tmp_path):
    server = Server(deepinfer_bin, model_dir, "--speculative", "mtp", "--num-speculative-tokens", "3")
    try:
        before, before_at = spec_counters(server)
        spec, text = run_bench(deepinfer_bin, server, tmp_path)
        after, after_at = spec_counters(server)
    finally:
        assert server.stop() == 0, "".join(server.log)
    drafted = after["draft"] - before["draft"]
    accepted = after["accepted"] - before["accepted"]
    assert drafted > 0
    assert spec["draft_tokens"] == drafted
    assert spec["accepted_tokens"] == accepted
    assert spec["acceptance_rate"] == pytest.approx(accepted / drafted)
    positions = spec["per_position"]
    assert [p["position"] for p in positions] == list(range(len(after_at["draft"])))
    for p in positions:
        i = p["position"]
        assert p["draft_tokens"] == after_at["draft"][i] - before_at["draft"].get(i, 0)
        assert p["accepted_tokens"] == after_at["accepted"][i] - before_at["accepted"].get(i, 0)
    steps = positions[0]["draft_tokens"]  # every drafting step drafts at position 0
    assert spec["accept_length"] == pytest.approx(1 + accepted / steps)
    assert 1 <= spec["accept_length"] <= 4
    assert "Speculative drafts / accepted" in text and "Accept length" in text


def test_a_server_without_speculation_reports_no_drafts(deepinfer_bin, model_dir, tmp_path):
    server = Server(deepinfer_bin, model_dir)
    try:
        spec, _ = run_bench(deepinfer_bin, server, tmp_path)
    finally:
        assert server.stop() == 0, "".join(server.log)
    assert spec["draft_tokens"] == 0 and spec["accepted_tokens"] == 0
    assert spec["acceptance_rate"] is None and spec["accept_length"] is None
    assert spec["per_position"] == []
