"""The benchmark's prompts have the token lengths it claims under the real DeepSeek-V3 tokenizer
(the `tokenizers` library), so input lengths, prefix sharing and caching behave as in production.
Exact for word text (random, shared-prefix, replay lengths); the agentic prompts, which add
labels and tool definitions, are exact too because they are built from the same kind of pieces."""
import json
import pathlib
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")

ROOT = pathlib.Path(__file__).resolve().parents[2]
CANDIDATES = [ROOT / "tests/data/tokenizers/deepseek-v3", ROOT.parent / "shared/fixtures/tokenizers/deepseek-v3"]


@pytest.fixture(scope="module")
def tokenizer():
    for d in CANDIDATES:
        if (d / "tokenizer.json").exists():
            return tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    pytest.skip("no DeepSeek-V3 tokenizer.json found")


def dump(deepinfer_bin, tmp_path, *args):
    out = tmp_path / "dump.jsonl"
    subprocess.run([deepinfer_bin, "bench", "serve", "--base-url", "http://127.0.0.1:9", "--model", "m",
                    "--dump-workload", out, *map(str, args)], check=True, timeout=60)
    return [json.loads(line) for line in out.read_text().splitlines()]


def n_tokens(tokenizer, text):
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("args", [
    ["--workload", "random", "--input-len", "uniform:1:3000", "--num-requests", 40],
    ["--workload", "shared-prefix", "--prefix-len", 700, "--input-len", "uniform:1:300", "--num-requests", 12],
    ["--workload", "agentic", "--num-requests", 4, "--system-len", 3000, "--turns", 4, "--input-len", 200,
     "--tool-result-len", "uniform:1:500", "--output-len", "uniform:1:300"],
])
def test_lengths_are_exact_under_the_deepseek_v3_tokenizer(deepinfer_bin, tmp_path, tokenizer, args):
    lines = dump(deepinfer_bin, tmp_path, *args)
    assert lines
    for line in lines:
        prompt = "".join(m["content"] for m in line["messages"])
        assert n_tokens(tokenizer, prompt) == line["input_tokens"]
        # Each message alone too (chat templates tokenize them apart): the lengths add up.
        assert sum(n_tokens(tokenizer, m["content"]) for m in line["messages"]) == line["input_tokens"]


def test_agentic_system_prompt_has_its_length(deepinfer_bin, tmp_path, tokenizer):
    lines = dump(deepinfer_bin, tmp_path, "--workload", "agentic", "--num-requests", 2, "--system-len", 4096, "--turns", 1)
    system = lines[0]["messages"][0]
    assert system["role"] == "system" and "tool:" in system["content"]
    assert n_tokens(tokenizer, system["content"]) == 4096
    assert lines[1]["messages"][0] == system


def test_same_seed_same_workload(deepinfer_bin, tmp_path):
    args = ["--workload", "agentic", "--num-requests", 3, "--system-len", 300, "--turns", "uniform:1:4",
            "--output-len", "uniform:1:50", "--think-time", "exponential:1"]
    a = dump(deepinfer_bin, tmp_path, *args, "--seed", 1)
    b = dump(deepinfer_bin, tmp_path, *args, "--seed", 1)
    c = dump(deepinfer_bin, tmp_path, *args, "--seed", 2)
    assert a == b
    assert a != c
