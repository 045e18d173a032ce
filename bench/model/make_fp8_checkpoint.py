#!/usr/bin/env python3
"""Writes the fp8 twin of a bf16 DeepSeek checkpoint folder, as DeepSeek-V3 ships fp8: every
`*_proj.weight` becomes float8_e4m3fn with a `*_proj.weight_scale_inv` f32 tensor of one scale
per 128x128 block (amax / 448); the router, embeddings, lm_head and norms stay bf16; config.json
gains the fp8 quantization_config. Used by bench/model to compare fp8 decode with the same
weights in bf16 (and with llama.cpp's Q8_0 made from the same bf16 GGUF).

Usage: python3 make_fp8_checkpoint.py BF16_DIR OUT_DIR    (needs numpy and ml_dtypes)
"""
import json, os, sys

import ml_dtypes
import numpy as np

from checkpoint_twin import write_twin

BLOCK = 128


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

    def plan(name, t):
        shape = t["shape"]
        if not (name.endswith("_proj.weight") and len(shape) == 2):
            return None
        sshape = [-(-shape[0] // BLOCK), -(-shape[1] // BLOCK)]
        return [(name, "F8_E4M3", shape, shape[0] * shape[1], 0),
                (name + "_scale_inv", "F32", sshape, 4 * sshape[0] * sshape[1], 1)]

    write_twin(src, out, plan, quantize)
    config = json.load(open(os.path.join(src, "config.json")))
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                     "weight_block_size": [BLOCK, BLOCK]}
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
    print("done", out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
