#!/usr/bin/env python3
"""Writes a random DeepSeek-V4.1 checkpoint (DeepseekV41ForCausalLM) of any shape in the published
V4.1-Flash layout, for tests (tiny models) and benchmarks (V4.1-Flash layer shapes, fewer layers
and experts).

Usage:
  python3 tools/make_v41_checkpoint.py OUT_DIR [--preset tiny-v41|v41-flash-like] [--set key=value ...]
      [--dtype bf16|fp8] [--tokenizer DIR] [--seed S]

Presets (text_config dicts; --set changes them, dotted keys for nested fields):
- tiny-v41: the shape of the shared fixture tiny-v41 (hidden 64, vocab 1024, 10 layers with
  compress_ratios [0, 0, 2, 2, 2, 2, 1, 1, 1, 1] + one DSpark block, KV sources 2, 4, 6, index
  sources 2, 4, 6, 8, candidate source 6, window 16, Engram on layers 1 and 4, head_dim 40).
- v41-flash-like: V4.1-Flash's layer shapes (hidden 5120, 64 heads x head_dim 512, rope 64,
  q_lora_rank 1280, o_groups 8 x o_lora_rank 1024, window 128, indexer 64 heads x 128, top-512,
  candidate blocks 2048 x 8, experts of 2304, top-6, hc_mult 4, Engram 2..4-grams x 8 heads x 256)
  with 8 layers, ratios [0, 0, 2, 2, 2, 1, 1, 1], KV sources 2, 3, 4 (ratio 2) and 5 (ratio 1):
  the KV arithmetic of Flash's sources 2, 8, 14 and 20, so its compressed KV costs the same 890
  bytes per token in the published formats; 8 routed experts instead of 384 and small Engram
  tables (engram_vocab_size 4099), for benchmarks on one machine.

What it writes into OUT_DIR: config.json in the published composite form (text_config,
vision_config, top-level ids; quantization_config with --dtype fp8), generation_config.json,
tokenizer.json and tokenizer_config.json (with --tokenizer DIR its files, else a WordLevel
vocabulary of case, space and accent variants, so that the Engram's normalization merges ids),
and model.safetensors with the published names (no "model." prefix): F32 hc_*, attn_sink,
gate.bias and gate.bias_vl; BF16 everything else. With --dtype fp8 the attention, compressor wkv,
indexer wq_b/wk, Engram wkv and shared-expert linears are F8_E4M3 with F8_E8M0 `.scale` per 32x32
block, routed experts FP4 e2m1 (two per I8 byte) with F8_E8M0 `.scale` per 32 inputs, and the
Engram tables F8_E4M3 with F8_E8M0 scales per 32 values of a row (BF16 tables carry a [rows, 1]
scale of ones). engram_compressed_vocab_size and engram_num_embeddings are derived: the first
from the tokenizer by the reference's normalization (NFKC, NFD, strip accents, lowercase,
whitespace runs to one space, strip; a lone space kept; decodes with U+FFFD keyed by the raw
token), the second as the sums of each layer's primes (ascending from engram_vocab_size, never
reused). DSpark blocks (mtp.N.*) are written and the engine sets them aside.

Weights are deterministic in --seed (one PCG64 stream per tensor, keyed by its name), distributed
as make_v4_checkpoint.py's. Prints one line of JSON: path, parameters, bytes, tensors, dtype, layers.
"""
import argparse
import copy
import json
import math
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_v4_checkpoint as v4  # noqa: E402
import weight_formats as wf  # noqa: E402
from deepseek_config import tokenizer_info  # noqa: E402

TINY_V41 = {
    "model_type": "deepseek_v41_text", "vocab_size": 1024, "hidden_size": 64, "moe_intermediate_size": 64,
    "num_hidden_layers": 10, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 40,
    "qk_rope_head_dim": 16, "q_lora_rank": 48, "o_lora_rank": 32, "o_groups": 2, "hidden_act": "silu",
    "swiglu_limit": 2.0, "rms_norm_eps": 1e-20, "attention_bias": False, "tie_word_embeddings": False,
    "max_position_embeddings": 4096, "rope_theta": 10000,
    "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 256},
    "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc", "norm_topk_prob": True, "routed_scaling_factor": 1.5, "sliding_window": 16,
    "compress_ratios": [0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 0], "compress_rope_theta": 160000,
    "kv_source_layer_ids": [2, 4, 6], "index_source_layer_ids": [2, 4, 6, 8], "index_n_heads": 8,
    "index_head_dim": 24, "index_topk": 8, "candidate_source_layer_id": 6, "candidate_topk_blocks": 4,
    "candidate_block_size": 4, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
    "engram_layer_ids": [1, 4], "engram_max_ngram_size": 4, "engram_vocab_size": 40, "engram_n_heads": 2,
    "engram_head_dim": 32, "engram_pad_token_id": 2, "num_nextn_predict_layers": 1,
}

V41_FLASH_LIKE = dict(copy.deepcopy(TINY_V41), **{
    "vocab_size": 129280, "hidden_size": 5120, "moe_intermediate_size": 2304, "num_hidden_layers": 8,
    "num_attention_heads": 64, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1280, "o_lora_rank": 1024,
    "o_groups": 8, "swiglu_limit": 10.0, "max_position_embeddings": 1048576,
    "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 65536},
    "n_routed_experts": 8, "num_experts_per_tok": 6, "sliding_window": 128,
    "compress_ratios": [0, 0, 2, 2, 2, 1, 1, 1, 0], "kv_source_layer_ids": [2, 3, 4, 5],
    "index_source_layer_ids": [2, 3, 4, 5, 6], "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
    "candidate_source_layer_id": 5, "candidate_topk_blocks": 2048, "candidate_block_size": 8,
    "engram_layer_ids": [1, 4], "engram_vocab_size": 4099, "engram_n_heads": 8, "engram_head_dim": 256,
})

PRESETS = {"tiny-v41": TINY_V41, "v41-flash-like": V41_FLASH_LIKE}

VISION = {"model_type": "deepseek_v41_vision", "num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
          "intermediate_size": 64, "patch_size": 14, "rope_theta": 10000, "downsample_ratio": 3,
          "max_image_tokens": 16, "min_pixels": 3136, "max_wh_ratio": None}

SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]


def word_level_tokenizer(vocab_size, seed):
    """A WordLevel vocabulary: the three specials, then words in case / space / accent variants."""
    rng = np.random.default_rng(seed)
    tokens, seen = list(SPECIALS), set(SPECIALS)
    accents = {"a": "á", "e": "é", "i": "î", "o": "ö", "u": "ü", "n": "ñ"}
    while len(tokens) < vocab_size:
        word = "".join(chr(ord("a") + int(c)) for c in rng.integers(0, 26, int(rng.integers(1, 6))))
        accented = "".join(accents.get(ch, ch) for ch in word)
        for t in (word, " " + word, word.capitalize(), " " + word.capitalize(), word.upper(), accented, word + " "):
            if t not in seen and len(tokens) < vocab_size:
                seen.add(t)
                tokens.append(t)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(SPECIALS)]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(tokens)}, "unk_token": SPECIALS[2]}}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": SPECIALS[0], "eos_token": SPECIALS[1],
              "pad_token": SPECIALS[2], "add_bos_token": False, "model_max_length": 65536}
    return tok, config


def compressed_vocab_size(tokenizer_json):
    """The number of distinct normalized keys over the tokenizer's ids (the reference's rule)."""
    from tokenizers import Regex, Tokenizer, normalizers
    tok = Tokenizer.from_file(tokenizer_json)
    sentinel = "\uE000"
    norm = normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), sentinel),
        normalizers.Strip(), normalizers.Replace(sentinel, " ")])
    keys = set()
    for t in range(tok.get_vocab_size()):
        text = tok.decode([t], skip_special_tokens=False)
        if "\ufffd" in text:
            keys.add(tok.id_to_token(t))
        else:
            n = norm.normalize_str(text)
            keys.add(n if n else text)
    return len(keys)


def layer_primes(layers, max_n, heads, start):
    def is_prime(v):
        return v >= 2 and all(v % k for k in range(2, int(math.isqrt(v)) + 1))
    sums, candidate = [], start
    for _ in layers:
        total = 0
        for _ in range(2, max_n + 1):
            for _ in range(heads):
                while not is_prime(candidate):
                    candidate += 1
                total += candidate
                candidate += 1
        sums.append(total)
    return sums


def build_config(preset, sets, dtype, vocab_size):
    text = copy.deepcopy(PRESETS[preset])
    for item in sets:
        key, value = v4.parse_set(item)
        node = text
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    if vocab_size is not None:
        text["vocab_size"] = vocab_size
    config = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "dtype": "bfloat16",
              "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "image_token_id": text["vocab_size"] - 2,
              "text_config": text, "vision_config": VISION}
    if dtype == "fp8":
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                         "scale_fmt": "ue8m0", "weight_block_size": [32, 32]}
    return config


def plan(text, dtype, seed):
    d, hc, L = text["hidden_size"], text["hc_mult"], text["num_hidden_layers"]
    H, hd = text["num_attention_heads"], text["head_dim"]
    G, o_lora, q_lora = text["o_groups"], text["o_lora_rank"], text["q_lora_rank"]
    E, inter = text["n_routed_experts"], text["moe_intermediate_size"]
    IH, ihd = text["index_n_heads"], text["index_head_dim"]
    vocab, ratios = text["vocab_size"], text["compress_ratios"]
    fp8 = dtype == "fp8"
    out = []

    def normal(name, shape, std, mean=0.0):
        return lambda: (mean + std * v4.rng_for(seed, name).standard_normal(shape, dtype=np.float32)).astype(np.float32)

    def f32(name, shape, std, mean=0.0):
        out.append(v4.Tensor(name, "F32", shape, lambda: normal(name, shape, std, mean)().astype("<f4").tobytes()))

    def bf16(name, shape, std, mean=0.0):
        out.append(v4.Tensor(name, "BF16", shape,
                             lambda: wf.bf16_bits(normal(name, shape, std, mean)()).astype("<u2").tobytes()))

    def norm(name, size):
        bf16(name, [size], 0.1, 1.0)

    def linear(prefix, rows, cols, gain=1.0, quant=fp8, fp4=False):
        gen = normal(prefix + ".weight", [rows, cols], gain / math.sqrt(cols))
        cache = {}
        if fp4 and fp8:
            def packed():
                cache["codes"], cache["scale"] = v4.fp4_rows(gen())
                return cache["codes"].tobytes()
            out.append(v4.Tensor(prefix + ".weight", "I8", [rows, cols // 2], packed))
            out.append(v4.Tensor(prefix + ".scale", "F8_E8M0", [rows, cols // 32], lambda: cache.pop("scale").tobytes()))
        elif quant:
            def codes():
                cache["codes"], cache["scale"] = v4.fp8_blocks(gen(), 32)
                return cache["codes"].tobytes()
            out.append(v4.Tensor(prefix + ".weight", "F8_E4M3", [rows, cols], codes))
            out.append(v4.Tensor(prefix + ".scale", "F8_E8M0", [-(-rows // 32), -(-cols // 32)],
                                 lambda: cache.pop("scale").tobytes()))
        else:
            out.append(v4.Tensor(prefix + ".weight", "BF16", [rows, cols],
                                 lambda: wf.bf16_bits(gen()).astype("<u2").tobytes()))

    def engram_table(prefix, rows, dim):
        gen = normal(prefix + ".weight", [rows, dim], 1.0)
        if not fp8:
            out.append(v4.Tensor(prefix + ".weight", "BF16", [rows, dim], lambda: wf.bf16_bits(gen()).astype("<u2").tobytes()))
            out.append(v4.Tensor(prefix + ".scale", "BF16", [rows, 1],
                                 lambda: wf.bf16_bits(np.ones((rows, 1), np.float32)).astype("<u2").tobytes()))
            return
        cache = {}

        def codes():
            w = gen()
            groups = w.reshape(rows, dim // 32, 32)
            cache["scale"], scale = v4.pow2_scale(np.abs(groups).max(axis=2), 448.0)
            return wf.e4m3_encode((groups / scale[:, :, None]).reshape(rows, dim)).tobytes()
        out.append(v4.Tensor(prefix + ".weight", "F8_E4M3", [rows, dim], codes))
        out.append(v4.Tensor(prefix + ".scale", "F8_E8M0", [rows, dim // 32], lambda: cache.pop("scale").tobytes()))

    def hc_params(prefix):
        n_mix = (2 + hc) * hc
        f32(prefix + "_fn", [n_mix, hc * d], 0.1 / math.sqrt(hc * d))
        f32(prefix + "_base", [n_mix], 0.5)
        f32(prefix + "_scale", [3], 0.1, 1.0)

    def block(p, layer, n_experts):
        out_gain = 1.0 / math.sqrt(2 * L)
        ratio = ratios[layer]
        norm(p + "attn_norm.weight", d)
        norm(p + "ffn_norm.weight", d)
        hc_params(p + "hc_attn")
        hc_params(p + "hc_ffn")
        f32(p + "attn.attn_sink", [H], 1.0)
        linear(p + "attn.wq_a", q_lora, d)
        norm(p + "attn.q_norm.weight", q_lora)
        linear(p + "attn.wq_b", H * hd, q_lora)
        linear(p + "attn.wkv", hd, d)
        norm(p + "attn.kv_norm.weight", hd)
        linear(p + "attn.wo_a", G * o_lora, H * hd // G)
        linear(p + "attn.wo_b", d, G * o_lora, out_gain)
        if layer < L and layer in text["kv_source_layer_ids"]:
            linear(p + "attn.compressor.wkv", hd, d)
            if ratio > 1:
                linear(p + "attn.compressor.wgate", hd, d, quant=False)
            norm(p + "attn.compressor.norm.weight", hd)
            linear(p + "attn.indexer.wk", ihd, hd)
            norm(p + "attn.indexer.k_norm.weight", ihd)
        if layer < L and layer in text["index_source_layer_ids"]:
            linear(p + "attn.indexer.wq_b", IH * ihd, q_lora)
            linear(p + "attn.indexer.weights_proj", IH, d, quant=False)
        if layer < L and layer in text["engram_layer_ids"]:
            i = text["engram_layer_ids"].index(layer)
            n, heads, edim = text["engram_max_ngram_size"], text["engram_n_heads"], text["engram_head_dim"]
            engram_table(p + "engram.embed", text["engram_num_embeddings"][i], edim)
            linear(p + "engram.wkv", (hc + 1) * d, (n - 1) * heads * edim)
            bf16(p + "engram.q_weight", [hc, d], 0.2, 1.0)
            bf16(p + "engram.k_weight", [hc, d], 0.2, 1.0)
        linear(p + "ffn.gate", n_experts, d, quant=False)
        f32(p + "ffn.gate.bias", [n_experts], 0.1)
        f32(p + "ffn.gate.bias_vl", [n_experts], 0.1)
        for e in range(n_experts):
            q = f"{p}ffn.experts.{e}."
            linear(q + "w1", inter, d, fp4=True)
            linear(q + "w3", inter, d, fp4=True)
            linear(q + "w2", d, inter, out_gain, fp4=True)
        si = text["n_shared_experts"] * inter
        if si:
            linear(p + "ffn.shared_experts.w1", si, d)
            linear(p + "ffn.shared_experts.w3", si, d)
            linear(p + "ffn.shared_experts.w2", d, si, out_gain)

    bf16("embed.weight", [vocab, d], 1.0)
    bf16("head.weight", [vocab, d], 3.0 / math.sqrt(d))
    norm("norm.weight", d)
    for i in range(L):
        block(f"layers.{i}.", i, E)
    for m in range(text["num_nextn_predict_layers"]):  # DSpark draft blocks: written, set aside by the engine
        p = f"mtp.{m}."
        block(p, L + m, text.get("dspark_n_routed_experts", E))
        bf16(p + "main_proj.weight", [d, 3 * d], 1.0 / math.sqrt(3 * d))
        norm(p + "main_norm.weight", d)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description="Random DeepSeek-V4.1 checkpoint in the published layout")
    parser.add_argument("out_dir")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny-v41")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="text_config field (JSON value; dotted keys for nested fields)")
    parser.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    parser.add_argument("--tokenizer", help="folder with tokenizer.json/tokenizer_config.json to copy in")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    vocab_size = None
    if args.tokenizer:
        vocab_size = tokenizer_info(args.tokenizer)[0]
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.isfile(os.path.join(args.tokenizer, name)):
                shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out_dir, name))
    config = build_config(args.preset, args.set, args.dtype, vocab_size)
    text = config["text_config"]
    if not args.tokenizer:
        tok, tok_config = word_level_tokenizer(text["vocab_size"], args.seed)
        with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False)
        with open(os.path.join(args.out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(tok_config, f, ensure_ascii=False)
    if text.get("engram_layer_ids"):
        text["engram_compressed_vocab_size"] = compressed_vocab_size(os.path.join(args.out_dir, "tokenizer.json"))
        text["engram_num_embeddings"] = layer_primes(text["engram_layer_ids"], text["engram_max_ngram_size"],
                                                     text["engram_n_heads"], text["engram_vocab_size"])
    tensors = plan(text, args.dtype, args.seed)
    n_bytes = v4.write_safetensors(os.path.join(args.out_dir, "model.safetensors"), tensors)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
                   "do_sample": False}, f, indent=2)
    params = sum(math.prod(t.shape) * (2 if t.dtype == "I8" else 1) for t in tensors if not t.name.endswith(".scale"))
    print(json.dumps({"path": args.out_dir, "parameters": params, "bytes": n_bytes, "tensors": len(tensors),
                      "dtype": args.dtype, "layers": text["num_hidden_layers"]}))


if __name__ == "__main__":
    main()
