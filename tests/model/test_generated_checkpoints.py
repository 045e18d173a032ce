"""Checkpoints of these architectures that the golden fixtures do not cover, made by the
project's generator (tools/make_checkpoint.py): every variant (sharded, MTP layers set aside,
FP8 including kv_a_proj, group-limited routing, MoE every other layer, tied embeddings, plain
RoPE, ...) loads and generates finite logprobs; sharding the same weights changes nothing,
bitwise; a truncated shard is reported by name; --lm-head-dtype fp8 gives exactly what a
checkpoint storing the lm_head in fp8 gives, and int8 (which no checkpoint stores; its goldens in
test_golden.py) runs on the same models."""
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


def generate(deepinfer_bin, model, prompt="5,17,300,2,9", n=8, flags=()):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", prompt,
                          "--max-tokens", str(n), "--temperature", "0", "--ignore-eos", "--json", *flags],
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


@pytest.mark.parametrize("activations", ["f32", "bf16"])
def test_fp8_lm_head_is_the_checkpoint_that_stores_it_in_fp8(deepinfer_bin, tmp_path, activations):
    """--lm-head-dtype fp8 on a bf16 lm_head: the outputs, bit for bit, of the same weights with the
    lm_head quantized by the generator (tools/weight_formats.py: numpy, 128 x 128 blocks, scale
    amax / 448, nearest-even e4m3) and stored as fp8. So the engine's requantization at load gives
    the generator's codes and scales, and the weight then runs as any fp8 weight (with bf16
    activations on AMX, relaid tile-major). A stored fp8 lm_head ignores the flag. Without the flag
    the outputs differ: the test sees the lm_head's precision."""
    fp8 = make(tmp_path / "fp8", "--dtype", "fp8", "--seed", "5")
    stored = make(tmp_path / "stored", "--dtype", "fp8", "--fp8-lm-head", "--seed", "5")
    act = ["--activation-dtype", activations]
    requantized = generate(deepinfer_bin, fp8, flags=act + ["--lm-head-dtype", "fp8"])
    assert requantized == generate(deepinfer_bin, stored, flags=act)
    assert requantized == generate(deepinfer_bin, stored, flags=act + ["--lm-head-dtype", "fp8"])  # fp8 stays
    assert requantized["logprobs"] != generate(deepinfer_bin, fp8, flags=act)["logprobs"]


@pytest.mark.parametrize("head", ["fp8", "int8"])
def test_requantized_lm_head_of_tied_embeddings_and_bad_values(deepinfer_bin, tmp_path, head):
    """A tied lm_head (the embedding's tensor) is requantized (fp8 or int8) while the embedding
    keeps reading its bf16 rows; an unknown --lm-head-dtype is refused by name."""
    tied = make(tmp_path / "tied", "--set", "tie_word_embeddings=true", "--seed", "6")
    plain, quant = generate(deepinfer_bin, tied), generate(deepinfer_bin, tied, flags=["--lm-head-dtype", head])
    assert len(quant["output_ids"]) == 8 and all(math.isfinite(lp) and lp <= 0 for lp in quant["logprobs"])
    assert quant["output_ids"][0] == plain["output_ids"][0] and quant["logprobs"] != plain["logprobs"]
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(tied), "--prompt-ids", "1", "--max-tokens", "1",
                          "--lm-head-dtype", "fp4"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--lm-head-dtype" in out.stderr and "fp4" in out.stderr


@pytest.mark.parametrize("head", ["fp8", "int8"])
@pytest.mark.parametrize("fixture", ["tiny-v4-fp8", "tiny-v41"])
def test_requantized_lm_head_on_deepseek_v4_and_v41(deepinfer_bin, fixture, head):
    """DeepSeek-V4's and V4.1's bf16 head takes the flag too (its values: fp8_requantize_test)."""
    model = ROOT / "tests" / "data" / "models" / fixture
    plain, quant = generate(deepinfer_bin, model), generate(deepinfer_bin, model, flags=["--lm-head-dtype", head])
    assert len(quant["output_ids"]) == 8 and all(math.isfinite(lp) and lp <= 0 for lp in quant["logprobs"])
    assert quant["logprobs"] != plain["logprobs"]
