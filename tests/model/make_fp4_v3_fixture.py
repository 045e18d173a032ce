#!/usr/bin/env python3
"""Writes the FP4 DeepSeek-V3 fixture pair used by tests/model/fp4_v3_weights_test.cpp:

  tests/data/models/tiny-v3-fp4       a small V3 checkpoint (2 layers, the second MoE with 8 routed
                                      experts and a shared one) from tools/make_checkpoint.py, every
                                      linear DeepInfer takes in FP4 quantized by
                                      bench/model/make_fp4_checkpoint.py --linears all
  tests/data/models/tiny-v3-fp4-bf16  the same checkpoint with those weights written back as BF16,
                                      dequantized here by the rule of the shared fixtures' README
                                      (not by the code under test): nibble j = low half of byte
                                      j / 2 when j is even, else the high half; W = E2M1[nibble] *
                                      2^(scale - 127), exact in bf16

It also checks the quantizer against the source weights independently: each scale is
2^ceil(log2(amax / 6)) of its block of 32 and each dequantized value is a nearest grid value to
the source value (ties to the even code).

Usage: python3 tests/model/make_fp4_v3_fixture.py   (from the repository root; numpy)
"""
import json, os, shutil, struct, subprocess, sys, tempfile

import numpy as np

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], np.float64)
SHAPE = ["hidden_size=64", "intermediate_size=96", "moe_intermediate_size=32", "vocab_size=256",
         "num_attention_heads=2", "num_key_value_heads=2", "n_routed_experts=8", "num_experts_per_tok=2",
         "n_group=4", "topk_group=2", "kv_lora_rank=32", "q_lora_rank=64", "qk_nope_head_dim=32",
         "qk_rope_head_dim=16", "v_head_dim=32"]


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return header, data


def array(header, data, name):
    t = header[name]
    a, b = t["data_offsets"]
    dt = {"BF16": np.uint16, "F32": np.float32, "I8": np.uint8, "F8_E8M0": np.uint8}[t["dtype"]]
    return np.frombuffer(data[a:b], dt).reshape(t["shape"])


def dequantize(packed, scales):
    rows, half = packed.shape
    nib = np.empty((rows, half * 2), np.uint8)
    nib[:, 0::2], nib[:, 1::2] = packed & 15, packed >> 4
    return E2M1[nib] * np.exp2(np.repeat(scales.astype(np.float64) - 127, 32, axis=1))


def check_against_source(w, packed, scales, name):
    blocks = w.reshape(w.shape[0], -1, 32)
    amax = np.abs(blocks).max(axis=2)
    s = np.exp2(scales.astype(np.float64) - 127)
    if not (np.all(s >= amax / 6) and np.all(s / 2 < amax / 6)):
        raise SystemExit(f"{name}: a scale is not 2^ceil(log2(amax / 6))")
    deq = dequantize(packed, scales)
    x = w / np.repeat(s, 32, axis=1)
    dist = np.abs(np.abs(x)[..., None] - E2M1[None, None, :8])
    best = dist.min(axis=2)
    got = np.abs(np.abs(deq / np.repeat(s, 32, axis=1)) - np.abs(x))
    if not np.all(got == best):
        raise SystemExit(f"{name}: a value is not rounded to a nearest E2M1 value")
    nib = np.empty(w.shape, np.uint8)
    nib[:, 0::2], nib[:, 1::2] = packed & 15, packed >> 4
    tie = (dist == best[..., None]).sum(axis=2) == 2
    if np.any((nib[tie] & 7) % 2 != 0):
        raise SystemExit(f"{name}: a tie is not rounded to the even code")
    if np.any(np.signbit(deq) != np.signbit(w)):
        raise SystemExit(f"{name}: a sign was lost")


def bf16_bits(x):
    u = x.astype(np.float32).view(np.uint32)
    if np.any(u & 0xFFFF):
        raise SystemExit("a dequantized value is not exact in bf16")
    return (u >> 16).astype(np.uint16)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    fp4_dir = os.path.join(root, "tests/data/models/tiny-v3-fp4")
    bf16_dir = os.path.join(root, "tests/data/models/tiny-v3-fp4-bf16")
    with tempfile.TemporaryDirectory() as src:
        sets = [a for kv in SHAPE for a in ("--set", kv)]
        subprocess.run([sys.executable, os.path.join(root, "tools/make_checkpoint.py"), src, "--preset", "tiny-v3",
                        "--layers", "2", "--seed", "20", *sets], check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(fp4_dir, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(root, "bench/model/make_fp4_checkpoint.py"), src, fp4_dir,
                        "--linears", "all"], check=True)
        src_header, src_data = read(os.path.join(src, "model.safetensors"))
    header, data = read(os.path.join(fp4_dir, "model.safetensors"))
    out_header, blobs, off = {}, [], 0
    for name in sorted(header, key=lambda n: header[n]["data_offsets"][0]):
        t = header[name]
        if t["dtype"] == "F8_E8M0":
            continue
        if t["dtype"] == "I8":
            packed, scales = array(header, data, name), array(header, data, name[:-len(".weight")] + ".scale")
            w = (array(src_header, src_data, name).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            check_against_source(w, packed, scales, name)
            blob, dtype, shape = bf16_bits(dequantize(packed, scales)).tobytes(), "BF16", src_header[name]["shape"]
        else:
            a, b = t["data_offsets"]
            blob, dtype, shape = data[a:b], t["dtype"], t["shape"]
        out_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    out_header["__metadata__"] = {"format": "pt"}
    h = json.dumps(out_header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    shutil.rmtree(bf16_dir, ignore_errors=True)
    os.makedirs(bf16_dir)
    with open(os.path.join(bf16_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    for extra in ("config.json", "generation_config.json"):
        shutil.copy(os.path.join(fp4_dir, extra), bf16_dir)
    n_fp4 = sum(1 for t in header.values() if t["dtype"] == "I8")
    print(f"{fp4_dir}: {n_fp4} FP4 linears; {bf16_dir}: their bf16 expansion")


if __name__ == "__main__":
    main()
