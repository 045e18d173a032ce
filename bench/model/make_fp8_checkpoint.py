#!/usr/bin/env python3
"""Writes the fp8 twin of a bf16 DeepSeek checkpoint folder, as DeepSeek-V3 ships fp8: every
`*_proj.weight` becomes float8_e4m3fn with a `*_proj.weight_scale_inv` f32 tensor of one scale
per 128x128 block (amax / 448); the router, embeddings, lm_head and norms stay bf16; config.json
gains the fp8 quantization_config. Used by bench/model to compare fp8 decode with the same
weights in bf16 (and with llama.cpp's Q8_0 made from the same bf16 GGUF).

Usage: python3 make_fp8_checkpoint.py BF16_DIR OUT_DIR    (needs numpy and ml_dtypes)
"""
import json, os, shutil, struct, sys

import ml_dtypes
import numpy as np

BLOCK = 128


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def quantize(w):
    """w: [rows, cols] float32 -> (e4m3 bytes [rows, cols], scale_inv [ceil(rows/128), ceil(cols/128)])."""
    rows, cols = w.shape
    br, bc = -(-rows // BLOCK), -(-cols // BLOCK)
    padded = np.zeros((br * BLOCK, bc * BLOCK), np.float32)
    padded[:rows, :cols] = w
    blocks = padded.reshape(br, BLOCK, bc, BLOCK)
    scale = np.abs(blocks).max(axis=(1, 3)) / 448.0
    scale[scale == 0] = 1.0
    q = (blocks / scale[:, None, :, None]).astype(ml_dtypes.float8_e4m3fn)
    return q.reshape(br * BLOCK, bc * BLOCK)[:rows, :cols].view(np.uint8), scale.astype(np.float32)


def main(src, out):
    os.makedirs(out, exist_ok=True)
    src_st = os.path.join(src, "model.safetensors")
    header, data_start = read_header(src_st)
    header.pop("__metadata__", None)
    names = sorted(header, key=lambda n: header[n]["data_offsets"][0])
    plan, off = [], 0  # (name, dtype, shape, nbytes, source name, kind)
    for name in names:
        shape = header[name]["shape"]
        if name.endswith("_proj.weight") and len(shape) == 2:
            plan.append((name, "F8_E4M3", shape, shape[0] * shape[1], name, "q"))
            sshape = [-(-shape[0] // BLOCK), -(-shape[1] // BLOCK)]
            plan.append((name + "_scale_inv", "F32", sshape, 4 * sshape[0] * sshape[1], name, "s"))
        else:
            nbytes = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            plan.append((name, header[name]["dtype"], shape, nbytes, name, "copy"))
    new_header = {}
    for name, dtype, shape, nbytes, _, _ in plan:
        new_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    new_header["__metadata__"] = {"format": "pt"}
    h = json.dumps(new_header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    mm = np.memmap(src_st, dtype=np.uint8, mode="r")
    cache = {}
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, dtype, shape, nbytes, srcname, kind in plan:
            a, b = header[srcname]["data_offsets"]
            raw = mm[data_start + a:data_start + b]
            if kind == "copy":
                f.write(raw.tobytes())
                continue
            if srcname not in cache:
                cache.clear()
                w = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
                cache[srcname] = quantize(w)
            q, s = cache[srcname]
            f.write(q.tobytes() if kind == "q" else s.tobytes())
    config = json.load(open(os.path.join(src, "config.json")))
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                     "weight_block_size": [BLOCK, BLOCK]}
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            shutil.copy(os.path.join(src, extra), out)
    print("done", out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
