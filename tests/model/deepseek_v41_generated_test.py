"""DeepSeek-V4.1 checkpoints that the golden fixtures do not cover, made by the project's generator
(tools/make_v41_checkpoint.py): FP8 32x32 linears with FP4 experts and FP8 Engram tables, widths
where the published KV formats apply, other source / reuse / re-index patterns, hyper-connection
widths, Engram orders and head counts, no Engram, no candidate blocks. Each loads and generates
finite logprobs with both the f32 and the default cache, and with bf16 activations (fp8 and FP4
linears on AMX tiles where the CPU has them, relaid at load), and prefill in chunks of 7 tokens
(cutting ratio-2 groups, the window and the n-grams anywhere) gives bitwise the same output as
one chunk. No reference produced values for these shapes: the goldens check the math, these
check that loading and the engine's paths hold for shapes the fixtures do not have."""
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATOR = [sys.executable, str(ROOT / "tools" / "make_v41_checkpoint.py")]
PROMPT = ",".join(str((i * 37 + 11) % 1000 + 3) for i in range(90))  # > window: compressed entries selected

VARIANTS = {
    "fp8-fp4-experts": ["--dtype", "fp8", "--seed", "3"],
    "published-kv-formats": ["--set", "head_dim=64", "--set", "index_head_dim=32", "--seed", "4"],
    "sources-1-3-hc2-no-candidates": [
        "--set", "num_hidden_layers=6", "--set", "compress_ratios=[0,2,2,1,1,1,0]", "--set", "kv_source_layer_ids=[1,3]",
        "--set", "index_source_layer_ids=[1,3,5]", "--set", "candidate_source_layer_id=-1", "--set", "hc_mult=2",
        "--set", "engram_layer_ids=[0]", "--set", "engram_max_ngram_size=3", "--set", "engram_n_heads=3", "--seed", "5"],
    "no-engram-fp8": ["--dtype", "fp8", "--set", "engram_layer_ids=[]", "--set", "sliding_window=8", "--seed", "6"],
}


def generate(deepinfer_bin, model, *extra):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", PROMPT, "--max-tokens", "8",
                          "--temperature", "0", "--ignore-eos", "--json", "--kv-cache-memory", str(64 << 20), *extra],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    assert "text-only" in out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_generated_v41_variant_runs(deepinfer_bin, tmp_path, variant):
    model = tmp_path / variant
    subprocess.run(GENERATOR + [str(model), *VARIANTS[variant]], check=True, capture_output=True, timeout=300)
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["DeepseekV41ForCausalLM"]
    for dtype, act in (("f32", "f32"), ("bf16", "f32"), ("bf16", "bf16")):
        flags = ["--kv-cache-dtype", dtype, "--activation-dtype", act]
        whole = generate(deepinfer_bin, model, *flags)
        assert len(whole["output_ids"]) == 8
        assert all(math.isfinite(lp) and lp <= 0 for lp in whole["logprobs"])
        chunked = generate(deepinfer_bin, model, *flags, "--max-num-batched-tokens", "7")
        assert chunked == whole, (dtype, act)


def test_engram_table_size_must_match_the_tokenizer(deepinfer_bin, tmp_path):
    model = tmp_path / "mismatch"
    subprocess.run(GENERATOR + [str(model)], check=True, capture_output=True, timeout=300)
    config = json.loads((model / "config.json").read_text())
    config["text_config"]["engram_compressed_vocab_size"] += 1
    (model / "config.json").write_text(json.dumps(config))
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", "3", "--max-tokens", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "engram_compressed_vocab_size" in out.stderr


MODELS = ROOT / "tests" / "data" / "models"


def generate_file(deepinfer_bin, model, prompts, *extra, max_tokens=16):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompts-file", str(prompts),
                          "--max-tokens", str(max_tokens), "--ignore-eos", "--json", "--kv-cache-memory", str(64 << 20),
                          *extra], capture_output=True, text=True, timeout=600, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    return out.stdout, out.stderr


@pytest.mark.parametrize("model,kv", [("tiny-v41", "f32"), ("tiny-v41-qat", "bf16")])
def test_ngram_speculation_gives_the_plain_output(deepinfer_bin, tmp_path, model, kv):
    """Speculative decoding on V4.1 is lossless: a rejected draft's window K=V, compressed entries
    and Engram ids are overwritten by the tokens accepted later, so the output equals plain
    decoding bitwise: the golden prompts with k = 1..4 drafts, and a repeating prompt, greedy and
    sampled, where the n-gram drafter proposes (tiny random models rarely repeat themselves, so
    drafts are few: at least one is proposed, and rejected ones are rolled back)."""
    cases = json.loads((MODELS / model / "golden.json").read_text())["cases"]
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"prompt_ids": c["prompt_ids"]}) + "\n" for c in cases))
    repeating = tmp_path / "repeating.jsonl"
    repeating.write_text(json.dumps({"prompt_ids": [17, 201, 33, 480, 75, 9, 612, 88] * 3}) + "\n")
    runs = [(golden, ["--temperature", "0"], 16, k) for k in (1, 2, 3, 4)]
    runs += [(repeating, ["--temperature", "0"], 120, 4), (repeating, ["--temperature", "0.8", "--seed", "5"], 300, 4)]
    drafted = 0
    for prompts, sampling, n, k in runs:
        plain, _ = generate_file(deepinfer_bin, MODELS / model, prompts, *sampling, "--kv-cache-dtype", kv, max_tokens=n)
        spec, err = generate_file(deepinfer_bin, MODELS / model, prompts, *sampling, "--kv-cache-dtype", kv,
                                  "--speculative", "ngram", "--num-speculative-tokens", str(k), max_tokens=n)
        assert spec == plain, (prompts.name, sampling, k)
        drafted += int(re.search(r"speculative: (\d+) draft tokens", err).group(1))
    assert drafted > 0
