"""DeepSeek-V4 checkpoints that the golden fixtures do not cover, made by the project's generator
(tools/make_v4_checkpoint.py): other widths, head and group counts, hyper-connection width,
compress-ratio patterns, windows, top-k, hash-routed layer counts, with and without an MTP block,
bf16 and FP8/FP4. Each loads and generates finite logprobs, and prefill in chunks of 7 tokens
(cutting compression groups and the window anywhere) gives bitwise the same output as one
chunk. No reference produced values for these shapes: the goldens check the math, these check
that loading and the engine's paths hold for shapes the fixtures do not have."""
import json
import math
import os
import pathlib
import subprocess
import sys
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATOR = [sys.executable, str(ROOT / "tools" / "make_v4_checkpoint.py")]
PROMPT = ",".join(str((i * 37 + 11) % 1000) for i in range(150))  # > window + 128: CSA and HCA entries

VARIANTS = {
    "fp8-fp4-experts": ["--dtype", "fp8", "--seed", "3"],
    "no-mtp-hc2-no-hash": ["--layers", "3", "--set", "num_nextn_predict_layers=0", "--set", "compress_ratios=[4,128,0]",
                           "--set", "hc_mult=2", "--set", "num_hash_layers=0", "--seed", "4"],
    "eight-heads-four-groups-fp8": ["--dtype", "fp8", "--set", "num_attention_heads=8", "--set", "o_groups=4",
                                    "--set", "sliding_window=8", "--set", "index_topk=2", "--set", "num_hash_layers=2",
                                    "--seed", "5"],
    "head-dim-64": ["--set", "head_dim=64", "--set", "qk_rope_head_dim=32", "--set", "index_head_dim=32",
                    "--set", "q_lora_rank=96", "--set", "hidden_size=96", "--set", "index_n_heads=4", "--seed", "6"],
}


def generate(deepinfer_bin, model, *extra):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", PROMPT, "--max-tokens", "8",
                          "--temperature", "0", "--ignore-eos", "--json", "--kv-cache-dtype", "f32",
                          "--kv-cache-memory", str(64 << 20), *extra],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_generated_v4_variant_runs(deepinfer_bin, tmp_path, variant):
    model = tmp_path / variant
    subprocess.run(GENERATOR + [str(model), *VARIANTS[variant]], check=True, capture_output=True, timeout=300)
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["DeepseekV4ForCausalLM"]
    whole = generate(deepinfer_bin, model)
    assert len(whole["output_ids"]) == 8
    assert all(math.isfinite(lp) and lp <= 0 for lp in whole["logprobs"])
    chunked = generate(deepinfer_bin, model, "--max-num-batched-tokens", "7")
    assert chunked == whole


def test_server_completes_with_a_v4_checkpoint(deepinfer_bin, tmp_path):
    """`deepinfer serve` on a V4 checkpoint with DeepSeek-V3's tokenizer: completions from text and
    from token ids, greedy, equal to `deepinfer generate` on the same ids."""
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from server import Server  # the e2e tests' server process helper

    model = tmp_path / "served"
    subprocess.run(GENERATOR + [str(model), "--tokenizer", str(ROOT / "tests" / "data" / "tokenizers" / "deepseek-v3"),
                                "--seed", "9"], check=True, capture_output=True, timeout=300)
    server = Server(deepinfer_bin, model)
    try:
        def complete(prompt):
            body = json.dumps({"model": "tiny", "prompt": prompt, "max_tokens": 6, "temperature": 0}).encode()
            req = urllib.request.Request(server.base + "/v1/completions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.loads(r.read())
        text = complete("Hello, DeepSeek-V4")
        assert text["choices"][0]["finish_reason"] == "length"
        assert text["usage"]["completion_tokens"] == 6
        ids = [5, 17, 300, 2, 9]
        by_ids = complete(ids)
        assert by_ids["usage"]["prompt_tokens"] == len(ids)
    finally:
        server.stop()
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", "5,17,300,2,9",
                          "--max-tokens", "6", "--temperature", "0", "--ignore-eos", "--json"],
                         capture_output=True, text=True, timeout=300, check=True)
    from_cli = json.loads(out.stdout)["output_ids"]
    text_of = subprocess.run([deepinfer_bin, "detokenize", "--model", str(model)], input=json.dumps({"ids": from_cli}),
                             capture_output=True, text=True, timeout=60, check=True)
    assert by_ids["choices"][0]["text"] == json.loads(text_of.stdout)["text"]


def test_truncated_v4_checkpoint_is_named(deepinfer_bin, tmp_path):
    model = tmp_path / "truncated"
    subprocess.run(GENERATOR + [str(model)], check=True, capture_output=True, timeout=300)
    path = model / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-1000])
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", "3", "--max-tokens", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "model.safetensors" in out.stderr
