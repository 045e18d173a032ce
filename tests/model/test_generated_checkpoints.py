"""Checkpoints of these architectures that the golden fixtures do not cover, made by the
project's generator (tools/make_checkpoint.py): every variant (sharded, MTP layers set aside,
FP8 including kv_a_proj, group-limited routing, MoE every other layer, tied embeddings, plain
RoPE, ...) loads and generates finite logprobs; sharding the same weights changes nothing,
bitwise; a truncated shard is reported by name."""
import json
import math
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

GENERATOR = [sys.executable, str(ROOT / "tools" / "make_checkpoint.py")]


def make(out, *args):
    subprocess.run(GENERATOR + [str(out), *args], check=True, capture_output=True, timeout=300)
    return out


def generate(deepinfer_bin, model, prompt="5,17,300,2,9", n=8):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", prompt,
                          "--max-tokens", str(n), "--temperature", "0", "--ignore-eos", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


VARIANTS = {
    "v3-sharded-mtp": ["--preset", "tiny-v3", "--shards", "3", "--mtp", "--seed", "7"],
    "v3-fp8-kv-a": ["--preset", "tiny-v3", "--dtype", "fp8", "--fp8-kv-a-proj", "--seed", "8"],
    "v2-group-limited": ["--preset", "tiny-v2", "--set", "topk_method=\"group_limited_greedy\"", "--set", "n_group=4",
                         "--set", "topk_group=2", "--set", "norm_topk_prob=true", "--set", "routed_scaling_factor=16.0"],
    "v3-dense-every-other": ["--preset", "tiny-v3", "--layers", "4", "--set", "moe_layer_freq=2",
                             "--set", "n_shared_experts=0", "--set", "tie_word_embeddings=true"],
    "v2-softmax-plain-rope": ["--preset", "tiny-v2", "--set", "rope_scaling=null", "--set", "q_lora_rank=64"],
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_loads_and_generates(deepinfer_bin, tmp_path, name):
    model = make(tmp_path / name, *VARIANTS[name])
    result = generate(deepinfer_bin, model)
    assert len(result["output_ids"]) == 8
    assert all(math.isfinite(lp) and lp <= 0 for lp in result["logprobs"])


def test_sharding_does_not_change_outputs(deepinfer_bin, tmp_path):
    single = generate(deepinfer_bin, make(tmp_path / "single", "--preset", "tiny-v3", "--seed", "3"))
    sharded = generate(deepinfer_bin, make(tmp_path / "sharded", "--preset", "tiny-v3", "--seed", "3", "--shards", "4"))
    assert single == sharded


def test_broken_checkpoint_names_the_tensor(deepinfer_bin, tmp_path):
    model = make(tmp_path / "broken", "--preset", "tiny-v3", "--shards", "2")
    index = json.loads((model / "model.safetensors.index.json").read_text())
    shard = model / sorted(set(index["weight_map"].values()))[-1]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", "1", "--max-tokens", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert shard.name in out.stderr and "truncated" in out.stderr
