"""Fixtures for the serving-benchmark tests: a stub server with known timings, and a runner for
`deepinfer bench serve` that returns its JSON report and per-request records."""
import json
import subprocess

import pytest


@pytest.fixture
def stub(deepinfer_bin):
    """stub(**options) starts `deepinfer bench stub-server` on a free loopback port and returns
    its base URL; every stub started is stopped after the test (and exits by itself anyway)."""
    procs = []

    def start(**options):
        args = [deepinfer_bin, "bench", "stub-server", "--host", "127.0.0.1", "--port", "0", "--lifetime", "120"]
        for key, value in options.items():
            args += ["--" + key.replace("_", "-"), str(value)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        return line.split()[-1]

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def bench_serve(deepinfer_bin, tmp_path):
    """bench_serve(base_url, *args, expect_rc=0) runs `deepinfer bench serve` and returns
    (report, records): the --output-json document and the --save-records lines."""
    counter = [0]

    def run(base_url, *args, expect_rc=0):
        counter[0] += 1
        out = tmp_path / f"report{counter[0]}.json"
        records = tmp_path / f"records{counter[0]}.jsonl"
        cmd = [deepinfer_bin, "bench", "serve", "--base-url", base_url, "--model", "stub", "--quiet",
               "--output-json", str(out), "--save-records", str(records), *map(str, args)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == expect_rc, proc.stdout + proc.stderr
        return json.loads(out.read_text()), [json.loads(line) for line in records.read_text().splitlines()]

    return run
