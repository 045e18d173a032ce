#!/usr/bin/env python3
"""Writes a random DeepSeek-V2/V3 checkpoint of any shape in the Hugging Face layout, for tests
(tiny models) and benchmarks (real-sized layers, fewer of them).

Usage:
  python3 tools/make_checkpoint.py OUT_DIR [--preset tiny-v3|tiny-v2|v2-lite|v3-like|v3]
      [--config-json FILE] [--layers N] [--set key=value ...] [--dtype bf16|fp8]
      [--fp8-kv-a-proj] [--mtp | --no-mtp] [--shards N] [--tokenizer DIR] [--seed S]

Presets (full config.json dicts; --layers and --set change them):
- tiny-v3, tiny-v2: the configs of the shared fixtures of those names (hidden 256, vocab 1024,
  3 layers, 16 experts of 64): a V3 model with low-rank query and grouped sigmoid routing with a
  correction bias, and a V2 model with a full-rank query and softmax greedy routing.
- v2-lite: DeepSeek-V2-Lite's layers (hidden 2048, 16 heads, kv_lora_rank 512, rope 64, nope
  128, v 128, no q_lora, 64 routed experts of 1408, top-6, 2 shared, dense intermediate 10944,
  vocab 102400, softmax/greedy, no top-k normalization, routed_scaling_factor 1.0) with
  4 layers (1 dense, then MoE): 2.25B parameters, 4.5 GB in bf16, 2.7 GB in fp8.
- v3-like: DeepSeek-V3's architecture (q_lora_rank 1536, 8 groups/top-4 groups sigmoid routing
  with correction bias, top-8, 1 shared, routed_scaling_factor 2.5, vocab 129280) at
  DeepSeek-V2-Lite's widths, 4 layers.
- v3: DeepSeek-V3's own shapes (hidden 7168, 128 heads, 256 experts of 2048, 3 dense layers
  first), 4 layers: 15.1B parameters, 17 GB in fp8 (30 GB in bf16), for big machines.
Default: tiny-v3.

What it writes into OUT_DIR (created if missing):
- config.json: the preset's fields (the same names and layout as Hugging Face DeepSeek-V2/V3
  configs), then --config-json's fields, then --layers, then each --set (the value is parsed as
  JSON, else taken as a string; a dotted key such as rope_scaling.factor sets a nested field).
  With --dtype fp8 it carries quantization_config {quant_method fp8, fmt e4m3, activation_scheme
  dynamic, weight_block_size [128, 128] unless the config gives another}.
- model.safetensors, or with --shards N: model-0000i-of-0000N.safetensors (split between tensors
  in module order, about equal in bytes) and model.safetensors.index.json. Tensor names and
  shapes are those of Hugging Face DeepSeek-V2/V3 checkpoints; within a file, tensors are sorted
  by name and packed in that order; the header is padded with spaces to 8 bytes.
- generation_config.json (bos/eos ids, do_sample false).
- with --tokenizer DIR: tokenizer.json and tokenizer_config.json (and special_tokens_map.json if
  present) copied in; vocab_size becomes the tokenizer's size (largest token id + 1, covering
  added tokens) unless the config asked explicitly for a size at least that large, and bos/eos
  ids come from tokenizer_config.json's bos_token/eos_token unless set with --set.
Stale model shards and index files of an earlier run in OUT_DIR are removed first.

Dtypes: everything BF16, except mlp.gate.e_score_correction_bias (F32, topk_method noaux_tc).
--dtype fp8 (the default when the config already has an fp8 quantization_config) stores every
attention and MLP/expert `*_proj.weight` as F8_E4M3 with a `*_proj.weight_scale_inv` F32
[ceil(rows/128), ceil(cols/128)] (value = e4m3 * scale_inv per block; partial edge blocks),
as DeepSeek-V3's published checkpoint does; embeddings, norms, router gates, lm_head and the MTP
eh_proj stay BF16. self_attn.kv_a_proj_with_mqa stays BF16 unless --fp8-kv-a-proj (the
published DeepSeek-V3 quantizes it; the project's tiny-v3-fp8 fixture does not), and lm_head
unless --fp8-lm-head: then quantized from its BF16 values (those of the BF16 checkpoint of the
seed), which is what the engine's --lm-head-dtype fp8 does to a BF16 lm_head at load.

--mtp writes num_nextn_predict_layers (at least 1) multi-token-prediction layers after the main
ones, model.layers.{L}.*: a full decoder layer plus embed_tokens, enorm, hnorm, eh_proj,
shared_head.norm and shared_head.head, as in DeepSeek-V3 (embed_tokens and shared_head.head
hold the same values as model.embed_tokens and lm_head). Without --mtp the written config says
num_nextn_predict_layers 0, so config and weights always agree; --no-mtp is that default.

Weights are deterministic in --seed: each tensor draws from its own PCG64 stream keyed by the
seed and the tensor's name, so the values do not depend on sharding, dtype or the other
tensors, and the bf16 and fp8 checkpoints of one seed hold the same weights (fp8 being their
block quantization). Each element is one 16-bit draw mapped through a 65536-level table of
normal quantiles (a normal distribution truncated at about 4.3 sigma, far finer than bf16's
resolution), which is several times faster than sampling a normal distribution. Scales keep
activations well-behaved through many layers: linear weights N(0, 1/fan_in), residual output
projections (o_proj, down_proj) further scaled by 1/sqrt(2 * layers), norms 1 + N(0, 0.1^2),
embeddings N(0, 1), lm_head N(0, 9/hidden) (logits spread with a standard deviation of about
3), router gate N(0, 1/hidden), router bias N(0, 0.1^2). Tensors are generated and written in
chunks (offsets come from the shapes first), so memory stays small for any model size.

At the end it prints one line of JSON: path, parameters (elements of all tensors but the
scale_inv ones), bytes (all safetensors files), files, tensors, dtype, layers, mtp_layers,
seconds. A 2-layer v2-lite checkpoint (1.09B parameters, 2.2 GB) takes about 4 s in bf16 and
7 s in fp8 (1.5 GB) on one core, with under 110 MB of memory.
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import weight_formats as wf  # noqa: E402
from deepseek_config import (FP8_DEFAULTS, PRESETS, TOKENIZER_FILES, ConfigError,  # noqa: E402
                             build_config, is_moe_layer)

CHUNK_ELEMENTS = 1 << 22  # elements generated per step: bounds memory to a few tens of MB


# ----------------------------------------------------------------------------------------------
# Layout: which tensors, what shapes, how they are drawn

class Weight:
    """One logical weight: its Hugging Face name and shape, how its values are drawn (mean + std
    * normal), its dtype when not quantized (BF16 or F32), whether --dtype fp8 stores it as
    F8_E4M3 with a scale_inv (True; False; "kv_a": only with --fp8-kv-a-proj), and the name whose
    random stream it uses (an MTP copy of the embedding reuses the embedding's)."""

    def __init__(self, name, shape, std, mean=0.0, dtype="BF16", quantizable=False, key=None):
        self.name, self.shape, self.std, self.mean = name, tuple(shape), std, mean
        self.dtype, self.quantizable, self.key = dtype, quantizable, key or name

    @property
    def numel(self):
        return math.prod(self.shape)


def model_weights(config):
    """Every weight of the checkpoint in module order: embedding, layers, MTP layers, norm, head."""
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    nope, rope, v_dim = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    q_rank, kv_rank = config.get("q_lora_rank"), config["kv_lora_rank"]
    n_main, n_mtp = config["num_hidden_layers"], config["num_nextn_predict_layers"]
    residual_gain = 1.0 / math.sqrt(2.0 * (n_main + n_mtp))
    head_std = 3.0 / math.sqrt(hidden)
    tied = bool(config.get("tie_word_embeddings"))
    embed_std = head_std if tied else 1.0
    vocab = config["vocab_size"]

    def linear(name, rows, cols, gain=1.0, quantizable=True):
        return Weight(name, (rows, cols), gain / math.sqrt(cols), quantizable=quantizable)

    def norm(name, size):
        return Weight(name, (size,), 0.1, mean=1.0)

    def mlp(prefix, inner):
        return [linear(prefix + "gate_proj.weight", inner, hidden),
                linear(prefix + "up_proj.weight", inner, hidden),
                linear(prefix + "down_proj.weight", hidden, inner, residual_gain)]

    def decoder_layer(i):
        p = f"model.layers.{i}."
        out = [norm(p + "input_layernorm.weight", hidden)]
        if q_rank is None:
            out.append(linear(p + "self_attn.q_proj.weight", heads * (nope + rope), hidden))
        else:
            out += [linear(p + "self_attn.q_a_proj.weight", q_rank, hidden),
                    norm(p + "self_attn.q_a_layernorm.weight", q_rank),
                    linear(p + "self_attn.q_b_proj.weight", heads * (nope + rope), q_rank)]
        out += [Weight(p + "self_attn.kv_a_proj_with_mqa.weight", (kv_rank + rope, hidden),
                       1.0 / math.sqrt(hidden), quantizable="kv_a"),
                norm(p + "self_attn.kv_a_layernorm.weight", kv_rank),
                linear(p + "self_attn.kv_b_proj.weight", heads * (nope + v_dim), kv_rank),
                linear(p + "self_attn.o_proj.weight", hidden, heads * v_dim, residual_gain),
                norm(p + "post_attention_layernorm.weight", hidden)]
        if not is_moe_layer(config, i):
            return out + mlp(p + "mlp.", config["intermediate_size"])
        n_experts, inner = config["n_routed_experts"], config["moe_intermediate_size"]
        out.append(linear(p + "mlp.gate.weight", n_experts, hidden, quantizable=False))
        if config.get("topk_method") == "noaux_tc":
            out.append(Weight(p + "mlp.gate.e_score_correction_bias", (n_experts,), 0.1,
                              dtype="F32"))
        for e in range(n_experts):
            out += mlp(f"{p}mlp.experts.{e}.", inner)
        if config.get("n_shared_experts"):
            out += mlp(p + "mlp.shared_experts.", inner * config["n_shared_experts"])
        return out

    weights = [Weight("model.embed_tokens.weight", (vocab, hidden), embed_std)]
    for i in range(n_main):
        weights += decoder_layer(i)
    for i in range(n_main, n_main + n_mtp):
        p = f"model.layers.{i}."
        weights += [Weight(p + "embed_tokens.weight", (vocab, hidden), embed_std,
                           key="model.embed_tokens.weight"),
                    norm(p + "enorm.weight", hidden), norm(p + "hnorm.weight", hidden),
                    linear(p + "eh_proj.weight", hidden, 2 * hidden, quantizable=False)]
        weights += decoder_layer(i)
        weights += [norm(p + "shared_head.norm.weight", hidden),
                    Weight(p + "shared_head.head.weight", (vocab, hidden),
                           embed_std if tied else head_std,
                           key="model.embed_tokens.weight" if tied else "lm_head.weight")]
    weights.append(norm("model.norm.weight", hidden))
    if not tied:
        weights.append(Weight("lm_head.weight", (vocab, hidden), head_std, quantizable="lm_head"))
    return weights


class Stored:
    """One tensor as stored: name, safetensors dtype, shape, byte size, and what fills it (the
    weight itself, or 'scale' for the weight_scale_inv of a quantized weight)."""

    ITEM_BYTES = {"BF16": 2, "F32": 4, "F8_E4M3": 1}

    def __init__(self, name, dtype, shape, weight, role):
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.weight, self.role = weight, role
        self.nbytes = math.prod(self.shape) * self.ITEM_BYTES[dtype]


def storage_plan(config, fp8, fp8_kv_a, fp8_lm_head=False):
    """Groups of stored tensors in module order; a quantized weight and its scale_inv form one
    group so that they land in the same shard."""
    block = (config.get("quantization_config") or FP8_DEFAULTS)["weight_block_size"]
    groups = []
    for w in model_weights(config):
        quantize = fp8 and (w.quantizable is True or (w.quantizable == "kv_a" and fp8_kv_a) or
                            (w.quantizable == "lm_head" and fp8_lm_head))
        if quantize:
            rows, cols = w.shape
            scale_shape = (wf.n_blocks(rows, block[0]), wf.n_blocks(cols, block[1]))
            groups.append([Stored(w.name, "F8_E4M3", w.shape, w, "fp8"),
                           Stored(w.name + "_scale_inv", "F32", scale_shape, w, "scale")])
        else:
            groups.append([Stored(w.name, w.dtype, w.shape, w, "plain")])
    return groups


def split_shards(groups, n_shards):
    """Contiguous runs of groups, about equal in bytes; every shard gets at least one group."""
    if n_shards > len(groups):
        raise ConfigError(f"--shards {n_shards} exceeds the {len(groups)} weights")
    sizes = [sum(t.nbytes for t in g) for g in groups]
    total, shards, start, done = sum(sizes), [], 0, 0
    for k in range(1, n_shards):
        target = total * k / n_shards
        end = start + 1  # at least one group in this shard
        done += sizes[start]
        while end < len(groups) - (n_shards - k) and done + sizes[end] / 2 <= target:
            done += sizes[end]
            end += 1
        shards.append(groups[start:end])
        start = end
    shards.append(groups[start:])
    return [[t for g in shard for t in g] for shard in shards]


# ----------------------------------------------------------------------------------------------
# Values

_QUANTILES = None


def normal_quantiles():
    """float32[65536]: the normal distribution's quantiles at (i + 0.5) / 65536, so that a
    uniform 16-bit index picks a (discretized) standard normal value."""
    global _QUANTILES
    if _QUANTILES is None:
        half = 32768
        # Upper half by symmetry: solve Q(x) = q for the upper-tail probability q with Newton's
        # method, Q(x) = erfc(x / sqrt 2) / 2 and Q'(x) = -pdf(x), from the rational start of
        # Abramowitz & Stegun 26.2.22 (error < 3e-3); the table is exact to float32.
        q = (np.arange(half, dtype=np.float64)[::-1] + 0.5) / (2 * half)
        t = np.sqrt(-2.0 * np.log(q))
        x = np.maximum(0.0, t - (2.30753 + 0.27061 * t) / (1.0 + 0.99229 * t + 0.04481 * t * t))
        erfc = np.frompyfunc(math.erfc, 1, 1)
        for _ in range(6):
            tail = erfc(x / math.sqrt(2.0)).astype(np.float64) / 2.0
            pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
            x = x + (tail - q) / pdf
        _QUANTILES = np.concatenate([-x[::-1], x]).astype(np.float32)
    return _QUANTILES


def weight_rng(seed, key):
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]
    entropy = [seed & 0xFFFFFFFF, seed >> 32] + words
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def chunk_rows(shape, block_rows):
    """Rows per generation step: a multiple of the FP8 block height and of 4 (so that every
    step but the last consumes whole 64-bit draws), about CHUNK_ELEMENTS elements."""
    unit = block_rows * 4 // math.gcd(block_rows, 4)
    cols = shape[1] if len(shape) == 2 else 1
    return max(unit, CHUNK_ELEMENTS // max(cols, 1) // unit * unit)


def weight_chunks(weight, seed, block_rows):
    """Yields the weight's random table indices (uint16), a run of whole rows at a time:
    [n_rows, cols] for a matrix, [n] for a vector. The stream does not depend on the chunking."""
    rng = weight_rng(seed, weight.key)
    rows = weight.shape[0]
    step = chunk_rows(weight.shape, block_rows) if len(weight.shape) == 2 else rows
    cols = weight.shape[1] if len(weight.shape) == 2 else 1
    for start in range(0, rows, step):
        n_rows = min(step, rows - start)
        n = n_rows * cols
        draws = rng.bit_generator.random_raw((n + 3) // 4).astype("<u8", copy=False)
        indices = draws.view("<u2")[:n]
        yield indices.reshape((n_rows, cols) if len(weight.shape) == 2 else (n_rows,))


# ----------------------------------------------------------------------------------------------
# Writing

def header_bytes(tensors):
    header, offset = {}, 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape),
                          "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return raw + b" " * (-len(raw) % 8)


class ShardWriter:
    """Streams the tensors of one safetensors file, sorted by name, to `path` (through a .tmp
    file renamed at the end, so that an interrupted run leaves no truncated checkpoint)."""

    def __init__(self, seed, block):
        self.seed, self.block = seed, block
        self.pending_scales = {}

    def write(self, path, tensors):
        tensors = sorted(tensors, key=lambda t: t.name)
        header = header_bytes(tensors)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(header)))
            f.write(header)
            for t in tensors:
                before = f.tell()
                self._write_tensor(f, t)
                assert f.tell() - before == t.nbytes, t.name
        os.replace(tmp, path)
        return 8 + len(header) + sum(t.nbytes for t in tensors)

    def _write_tensor(self, f, t):
        w = t.weight
        if t.role == "scale":
            f.write(np.ascontiguousarray(self.pending_scales.pop(t.name), dtype="<f4"))
            return
        table = normal_quantiles()
        values = (np.float32(w.mean) + np.float32(w.std) * table).astype(np.float32)
        if t.role == "plain" and t.dtype == "BF16":
            bits = wf.bf16_bits(values)
            for indices in weight_chunks(w, self.seed, self.block[0]):
                f.write(bits[indices].astype("<u2", copy=False))
        elif t.role == "plain":  # F32
            for indices in weight_chunks(w, self.seed, self.block[0]):
                f.write(values[indices].astype("<f4", copy=False))
        else:  # fp8: block-quantize whole block rows at a time
            if w.quantizable == "lm_head":  # from its bf16 values, as the engine requantizes a bf16 lm_head
                values = wf.bf16_to_f32(wf.bf16_bits(values))
            scales = []
            for indices in weight_chunks(w, self.seed, self.block[0]):
                codes, scale = wf.quantize_blocks(values[indices], *self.block)
                f.write(codes)
                scales.append(scale)
            self.pending_scales[t.name + "_scale_inv"] = np.concatenate(scales, axis=0)


def remove_stale_outputs(out_dir):
    for name in os.listdir(out_dir):
        stale = (name in ("model.safetensors", "model.safetensors.index.json")
                 or (name.startswith("model-") and name.endswith(".safetensors"))
                 or name.endswith(".safetensors.tmp"))
        if stale:
            os.remove(os.path.join(out_dir, name))


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def make_checkpoint(out_dir, config, dtype="bf16", shards=1, seed=0, tokenizer=None,
                    fp8_kv_a=False, fp8_lm_head=False):
    """Writes the checkpoint for `config` (a validated config.json dict) into out_dir and
    returns the summary dict."""
    began = time.time()
    os.makedirs(out_dir, exist_ok=True)
    remove_stale_outputs(out_dir)
    fp8 = dtype == "fp8"
    block = tuple((config.get("quantization_config") or FP8_DEFAULTS)["weight_block_size"])
    groups = storage_plan(config, fp8, fp8_kv_a, fp8_lm_head)
    shard_lists = split_shards(groups, shards)

    write_json(os.path.join(out_dir, "config.json"), config)
    generation = {"bos_token_id": config.get("bos_token_id"),
                  "eos_token_id": config.get("eos_token_id"), "do_sample": False}
    write_json(os.path.join(out_dir, "generation_config.json"), generation)
    if tokenizer:
        for name in TOKENIZER_FILES:
            src = os.path.join(tokenizer, name)
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(out_dir, name))

    writer = ShardWriter(seed, block)
    total_bytes, weight_map = 0, {}
    names = (["model.safetensors"] if shards == 1 else
             [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)])
    for file_name, tensors in zip(names, shard_lists):
        total_bytes += writer.write(os.path.join(out_dir, file_name), tensors)
        weight_map.update({t.name: file_name for t in tensors})
    if shards > 1:
        data_bytes = sum(t.nbytes for g in groups for t in g)
        write_json(os.path.join(out_dir, "model.safetensors.index.json"),
                   {"metadata": {"total_size": data_bytes},
                    "weight_map": dict(sorted(weight_map.items()))})
    return {"path": os.path.abspath(out_dir),
            "parameters": sum(t.weight.numel for g in groups for t in g if t.role != "scale"),
            "bytes": total_bytes, "files": len(names), "tensors": len(weight_map),
            "dtype": dtype, "layers": config["num_hidden_layers"],
            "mtp_layers": config["num_nextn_predict_layers"],
            "seconds": round(time.time() - began, 2)}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Write a random DeepSeek-V2/V3 checkpoint (Hugging Face layout).",
        epilog="See the module docstring of tools/make_checkpoint.py for the full contract.")
    parser.add_argument("out_dir", help="output folder (created if missing)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny-v3",
                        help="base config (default tiny-v3)")
    parser.add_argument("--config-json", help="config.json whose fields override the preset's")
    parser.add_argument("--layers", type=int, help="num_hidden_layers")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override a config field (value parsed as JSON); repeatable")
    parser.add_argument("--dtype", choices=("bf16", "fp8"),
                        help="bf16, or fp8 block-quantized projections (default: fp8 if the "
                             "config has an fp8 quantization_config, else bf16)")
    parser.add_argument("--fp8-kv-a-proj", action="store_true",
                        help="with fp8, also quantize self_attn.kv_a_proj_with_mqa")
    parser.add_argument("--fp8-lm-head", action="store_true",
                        help="with fp8, also quantize lm_head (untied only; not the MTP shared_head.head)")
    mtp = parser.add_mutually_exclusive_group()
    mtp.add_argument("--mtp", action="store_true",
                     help="write num_nextn_predict_layers (at least 1) MTP layers")
    mtp.add_argument("--no-mtp", dest="mtp", action="store_false", help="no MTP layers (default)")
    parser.add_argument("--shards", type=int, default=1, help="number of safetensors files")
    parser.add_argument("--tokenizer", help="folder with tokenizer.json/tokenizer_config.json")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    if not 0 <= args.seed < 2 ** 64:
        parser.error("--seed must be in [0, 2^64)")
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    try:
        config, dtype = build_config(args.preset, args.config_json, args.layers, args.set or (),
                                     args.tokenizer, args.mtp, args.dtype)
        summary = make_checkpoint(args.out_dir, config, dtype, args.shards, args.seed,
                                  args.tokenizer, args.fp8_kv_a_proj, args.fp8_lm_head)
    except ConfigError as e:
        parser.error(str(e))
    except OSError as e:
        print(f"make_checkpoint: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
