"""`deepinfer serve --expert-parallel 2` with a DeepSeek-V4 checkpoint under mpirun, through the
official `openai` client: both ranks answer completions (greedy with logprobs, seeded sampling,
streamed), alone and concurrently, exactly as a single V4 server does."""
import concurrent.futures
import os
import pathlib
import signal
import subprocess
import sys

import openai
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]  # the repository

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
from ep_server import MPIRUN, EpServer  # noqa: E402
from server import Server  # noqa: E402

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun is missing (scripts/setup.sh installs openmpi-bin)")

PROMPTS = ["The capital of France is", "1, 2, 3,", "hello world"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("ep-v4-serve") / "tiny-v4"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_v4_checkpoint.py"), str(out), "--preset", "tiny-v4",
                    "--tokenizer", str(ROOT / "tests" / "data" / "tokenizers" / "deepseek-v4"), "--seed", "2"],
                   check=True, capture_output=True, timeout=300)
    return out


def answers(base):
    c = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=60, max_retries=0)
    out = []
    for i, prompt in enumerate(PROMPTS):
        r = c.completions.create(model="tiny", prompt=prompt, max_tokens=10, temperature=0, logprobs=2,
                                 extra_body={"ignore_eos": True})
        out.append((r.choices[0].text, r.choices[0].logprobs.token_logprobs, r.choices[0].logprobs.top_logprobs))
        r = c.completions.create(model="tiny", prompt=prompt, max_tokens=8, temperature=0.9, seed=100 + i, n=2)
        out.append([ch.text for ch in r.choices])
    stream = c.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=8, temperature=0, stream=True,
                                  extra_body={"ignore_eos": True})
    out.append("".join(ch.choices[0].text for ch in stream if ch.choices))
    return out


def test_v4_every_rank_answers_as_a_single_server(deepinfer_bin, model):
    single = Server(deepinfer_bin, model)
    try:
        want = answers(single.base)
    finally:
        single.proc.send_signal(signal.SIGTERM)
        single.proc.wait(timeout=60)
    ep = EpServer(deepinfer_bin, model, 2, "--ep-timeout", "30")
    try:
        assert answers(ep.base(0)) == want
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(answers, ep.base(r)) for r in (0, 1, 1)]
            for f in futures:
                assert f.result(timeout=300) == want
    finally:
        ep.stop()
