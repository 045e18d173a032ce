#!/usr/bin/env python3
"""Writes a random DeepSeek-V4 checkpoint (DeepseekV4ForCausalLM) of any shape in the published
V4-Flash layout, for tests (tiny models) and benchmarks (V4-Flash layer shapes, fewer layers and
experts).

Usage:
  python3 tools/make_v4_checkpoint.py OUT_DIR [--preset tiny-v4|v4-flash-like] [--layers N]
      [--set key=value ...] [--dtype bf16|fp8] [--tokenizer DIR] [--seed S]

Presets (config.json dicts in the published top-level form; --layers and --set change them):
- tiny-v4: the shape of the shared fixture tiny-v4 (hidden 128, vocab 1024, 4 layers with
  compress_ratios [0, 4, 128, 4] + one MTP block, window 16, 4 heads x 128, 8 experts of 128).
- v4-flash-like: DeepSeek-V4-Flash's layer shapes (hidden 4096, 64 heads x head_dim 512, rope 64,
  q_lora_rank 1024, o_groups 8 x o_lora_rank 1024, window 128, indexer 64 heads x 128, top-512,
  experts of 2048, top-6, vocab 129280, hc_mult 4) with 4 layers (ratios [0, 4, 128, 4], the
  first hash-routed) and 16 routed experts instead of 256: for benchmarks on one machine.
--layers N keeps the ratio pattern (0 first, then 4 and 128 alternating) and adds the MTP entry 0.

What it writes into OUT_DIR (created if missing): config.json, generation_config.json (bos 0,
eos 1, or the tokenizer's), with --tokenizer DIR its tokenizer.json and tokenizer_config.json
(vocab_size becomes the tokenizer's size unless --set gives one), and model.safetensors with the published tensor names (no "model." prefix) and dtypes:
F32 hyper-connection parameters, attention sinks, compressor position biases and router biases;
I64 tid2eid in hash-routed layers; BF16 everything else. With --dtype fp8 the linear weights
(attention, indexer wq_b, shared experts, MTP e_proj/h_proj) are F8_E4M3 with F8_E8M0 `.scale`
per 128x128 block, and routed experts FP4 e2m1 packed two per I8 byte (element j in the low
nibble when j is even) with F8_E8M0 `.scale` per 32 inputs; scales are 2^ceil(log2(amax/448))
and 2^ceil(log2(amax/6)); config.json then carries quantization_config (fp8, e4m3, ue8m0).

Weights are deterministic in --seed (one numpy PCG64 stream per tensor, keyed by its name):
linear weights N(0, 1/fan_in), output projections further / sqrt(2 * layers), norms
1 + N(0, 0.1^2), embeddings N(0, 1), head N(0, 9/hidden), hyper-connection fn N(0, 0.1^2/width)
with base N(0, 0.5^2) and scales 1 + N(0, 0.1^2), sinks N(0, 1), ape N(0, 0.5^2), router bias
N(0, 0.1^2), tid2eid distinct random experts per token. Prints one line of JSON at the end:
path, parameters, bytes, tensors, dtype, layers.
"""
import argparse
import copy
import hashlib
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import weight_formats as wf  # noqa: E402
from deepseek_config import tokenizer_info  # noqa: E402

TINY_V4 = {
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 1, "hc_eps": 1e-6, "hc_mult": 4,
    "hc_sinkhorn_iters": 20, "head_dim": 128, "hidden_act": "silu", "hidden_size": 128, "index_head_dim": 64,
    "index_n_heads": 16, "index_topk": 4, "initializer_range": 0.02, "max_position_embeddings": 4096,
    "moe_intermediate_size": 128, "n_routed_experts": 8, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 4, "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_hash_layers": 1,
    "num_key_value_heads": 1, "num_nextn_predict_layers": 1, "o_groups": 2, "o_lora_rank": 128,
    "q_lora_rank": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-6,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 256,
                     "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "sliding_window": 16,
    "swiglu_limit": 2.0, "tie_word_embeddings": False, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 1024, "compress_rope_theta": 160000, "compress_ratios": [0, 4, 128, 4, 0],
}

V4_FLASH_LIKE = dict(copy.deepcopy(TINY_V4), **{
    "hidden_size": 4096, "num_attention_heads": 64, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024,
    "o_groups": 8, "o_lora_rank": 1024, "sliding_window": 128, "index_n_heads": 64, "index_head_dim": 128,
    "index_topk": 512, "moe_intermediate_size": 2048, "n_routed_experts": 16, "num_experts_per_tok": 6,
    "vocab_size": 129280, "max_position_embeddings": 1048576, "routed_scaling_factor": 1.5,
    "swiglu_limit": 10.0,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 65536,
                     "type": "yarn"},
})

PRESETS = {"tiny-v4": TINY_V4, "v4-flash-like": V4_FLASH_LIKE}

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def ratios_for(n_layers):
    return [0] + [4 if i % 2 == 1 else 128 for i in range(1, n_layers)]


def parse_set(item):
    key, _, raw = item.partition("=")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def build_config(preset, layers, sets, dtype, tokenizer=None):
    config = copy.deepcopy(PRESETS[preset])
    if tokenizer:
        size, bos, eos = tokenizer_info(tokenizer)
        config["vocab_size"] = size
        if bos is not None:
            config["bos_token_id"] = bos
        if eos is not None:
            config["eos_token_id"] = eos
    if layers is not None:
        config["num_hidden_layers"] = layers
        config["compress_ratios"] = ratios_for(layers) + [0] * config["num_nextn_predict_layers"]
    for item in sets:
        key, value = parse_set(item)
        node = config
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    if dtype == "fp8":
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                         "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
    return config


class Tensor:
    """One tensor to write: `make()` returns its bytes (little-endian, row-major)."""

    def __init__(self, name, dtype, shape, make):
        self.name, self.dtype, self.shape, self.make = name, dtype, list(shape), make

    @property
    def nbytes(self):
        size = {"BF16": 2, "F32": 4, "I64": 8, "F8_E4M3": 1, "F8_E8M0": 1, "I8": 1}[self.dtype]
        return size * math.prod(self.shape)


def rng_for(seed, name):
    digest = hashlib.sha256(name.encode()).digest()
    return np.random.Generator(np.random.PCG64([seed] + [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]))


def pow2_scale(amax, qmax):
    """2^ceil(log2(amax / qmax)) as a UE8M0 byte (all-zero blocks: 2^0)."""
    ratio = np.where(amax > 0, amax / qmax, 1.0)
    e = np.clip(np.ceil(np.log2(ratio)), -127, 127).astype(np.int32)
    return (e + 127).astype(np.uint8), np.ldexp(np.float32(1), e).astype(np.float32)


def fp8_blocks(w, block=128):
    rows, cols = w.shape
    amax = wf.block_amax(w, block, block)
    codes_e, scale = pow2_scale(amax, 448.0)
    full = np.repeat(np.repeat(scale, block, axis=0)[:rows], block, axis=1)[:, :cols]
    return wf.e4m3_encode(w / full), codes_e


def fp4_rows(w):
    rows, cols = w.shape
    groups = w.reshape(rows, cols // 32, 32)
    codes_e, scale = pow2_scale(np.abs(groups).max(axis=2), 6.0)
    q = groups / scale[:, :, None]
    nibble = np.abs(np.abs(q)[..., None] - E2M1[None, None, None, :8]).argmin(axis=-1).astype(np.uint8)
    nibble |= (q < 0).astype(np.uint8) << 3
    nibble = nibble.reshape(rows, cols)
    return (nibble[:, 0::2] | (nibble[:, 1::2] << 4)).astype(np.uint8), codes_e


def plan(config, dtype, seed):
    d, hc, L = config["hidden_size"], config["hc_mult"], config["num_hidden_layers"]
    H, hd, rd = config["num_attention_heads"], config["head_dim"], config["qk_rope_head_dim"]
    G, o_lora, q_lora = config["o_groups"], config["o_lora_rank"], config["q_lora_rank"]
    E, k, inter = config["n_routed_experts"], config["num_experts_per_tok"], config["moe_intermediate_size"]
    IH, ihd = config["index_n_heads"], config["index_head_dim"]
    vocab = config["vocab_size"]
    fp8 = dtype == "fp8"
    out = []

    def normal(name, shape, std, mean=0.0):
        return lambda: (mean + std * rng_for(seed, name).standard_normal(shape, dtype=np.float32)).astype(np.float32)

    def f32(name, shape, std, mean=0.0):
        out.append(Tensor(name, "F32", shape, lambda: normal(name, shape, std, mean)().astype("<f4").tobytes()))

    def bf16(name, shape, std, mean=0.0):
        out.append(Tensor(name, "BF16", shape, lambda: wf.bf16_bits(normal(name, shape, std, mean)()).astype("<u2").tobytes()))

    def norm(name, size):
        bf16(name, [size], 0.1, 1.0)

    def linear(prefix, rows, cols, gain=1.0, quant=fp8, fp4=False):
        gen = normal(prefix + ".weight", [rows, cols], gain / math.sqrt(cols))
        if fp4 and fp8:
            cache = {}

            def packed():
                cache["codes"], cache["scale"] = fp4_rows(gen())
                return cache["codes"].tobytes()
            out.append(Tensor(prefix + ".weight", "I8", [rows, cols // 2], packed))
            out.append(Tensor(prefix + ".scale", "F8_E8M0", [rows, cols // 32], lambda: cache.pop("scale").tobytes()))
        elif quant:
            cache = {}

            def codes():
                cache["codes"], cache["scale"] = fp8_blocks(gen())
                return cache["codes"].tobytes()
            out.append(Tensor(prefix + ".weight", "F8_E4M3", [rows, cols], codes))
            out.append(Tensor(prefix + ".scale", "F8_E8M0", [-(-rows // 128), -(-cols // 128)],
                              lambda: cache.pop("scale").tobytes()))
        else:
            out.append(Tensor(prefix + ".weight", "BF16", [rows, cols], lambda: wf.bf16_bits(gen()).astype("<u2").tobytes()))

    def hc_params(prefix, n_mix, n_scale):
        f32(prefix + "_fn", [n_mix, hc * d], 0.1 / math.sqrt(hc * d))
        f32(prefix + "_base", [n_mix], 0.5)
        f32(prefix + "_scale", [n_scale], 0.1, 1.0)

    def compressor(prefix, ratio, dim):
        coff = 2 if ratio == 4 else 1
        f32(prefix + "ape", [ratio, coff * dim], 0.5)
        norm(prefix + "norm.weight", dim)
        linear(prefix + "wgate", coff * dim, d, quant=False)
        linear(prefix + "wkv", coff * dim, d, quant=False)

    def block(p, ratio, hashed):
        out_gain = 1.0 / math.sqrt(2 * L)
        norm(p + "attn_norm.weight", d)
        norm(p + "ffn_norm.weight", d)
        hc_params(p + "hc_attn", (2 + hc) * hc, 3)
        hc_params(p + "hc_ffn", (2 + hc) * hc, 3)
        f32(p + "attn.attn_sink", [H], 1.0)
        linear(p + "attn.wq_a", q_lora, d)
        norm(p + "attn.q_norm.weight", q_lora)
        linear(p + "attn.wq_b", H * hd, q_lora)
        linear(p + "attn.wkv", hd, d)
        norm(p + "attn.kv_norm.weight", hd)
        linear(p + "attn.wo_a", G * o_lora, H * hd // G)
        linear(p + "attn.wo_b", d, G * o_lora, out_gain)
        if ratio > 0:
            compressor(p + "attn.compressor.", ratio, hd)
        if ratio == 4:
            compressor(p + "attn.indexer.compressor.", 4, ihd)
            linear(p + "attn.indexer.wq_b", IH * ihd, q_lora)
            linear(p + "attn.indexer.weights_proj", IH, d, quant=False)
        linear(p + "ffn.gate", E, d, quant=False)
        if hashed:
            name = p + "ffn.gate.tid2eid"
            out.append(Tensor(name, "I64", [vocab, k], lambda: np.argsort(
                rng_for(seed, name).random((vocab, E)), axis=1)[:, :k].astype("<i8").tobytes()))
        else:
            f32(p + "ffn.gate.bias", [E], 0.1)
        for e in range(E):
            q = f"{p}ffn.experts.{e}."
            linear(q + "w1", inter, d, fp4=True)
            linear(q + "w3", inter, d, fp4=True)
            linear(q + "w2", d, inter, out_gain, fp4=True)
        si = config["n_shared_experts"] * inter
        if si:
            linear(p + "ffn.shared_experts.w1", si, d)
            linear(p + "ffn.shared_experts.w3", si, d)
            linear(p + "ffn.shared_experts.w2", d, si, out_gain)

    bf16("embed.weight", [vocab, d], 1.0)
    bf16("head.weight", [vocab, d], 3.0 / math.sqrt(d))
    norm("norm.weight", d)
    hc_params("hc_head", hc, 1)
    ratios = config["compress_ratios"]
    for i in range(L):
        block(f"layers.{i}.", ratios[i], i < config["num_hash_layers"])
    for m in range(config["num_nextn_predict_layers"]):
        p = f"mtp.{m}."
        block(p, ratios[L + m], False)
        norm(p + "enorm.weight", d)
        norm(p + "hnorm.weight", d)
        norm(p + "norm.weight", d)
        linear(p + "e_proj", d, d)
        linear(p + "h_proj", d, d)
        hc_params(p + "hc_head", hc, 1)
    return out


def write_safetensors(path, tensors):
    """Tensors in plan order (a weight before its scale, whose bytes come from quantizing it)."""
    header, offset = {}, 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for t in tensors:
            data = t.make()
            assert len(data) == t.nbytes, t.name
            f.write(data)
    os.replace(tmp, path)
    return 8 + len(raw) + offset


def main(argv=None):
    parser = argparse.ArgumentParser(description="Random DeepSeek-V4 checkpoint in the published layout")
    parser.add_argument("out_dir")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny-v4")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config field (JSON value; dotted keys for nested fields)")
    parser.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    parser.add_argument("--tokenizer", help="folder with tokenizer.json/tokenizer_config.json to copy in")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    config = build_config(args.preset, args.layers, args.set, args.dtype, args.tokenizer)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.tokenizer:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.isfile(os.path.join(args.tokenizer, name)):
                shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out_dir, name))
    tensors = plan(config, args.dtype, args.seed)
    n_bytes = write_safetensors(os.path.join(args.out_dir, "model.safetensors"), tensors)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
                   "do_sample": False}, f, indent=2)
    params = sum(math.prod(t.shape) * (2 if t.dtype == "I8" else 1) for t in tensors if not t.name.endswith(".scale"))
    print(json.dumps({"path": args.out_dir, "parameters": params, "bytes": n_bytes, "tensors": len(tensors),
                      "dtype": args.dtype, "layers": config["num_hidden_layers"]}))


if __name__ == "__main__":
    main()
