#!/usr/bin/env python3
"""Writes the FP4 twin of a bf16 DeepSeek-V2/V3 checkpoint folder, in the layout DeepSeek-V4 ships
its routed experts: each `<name>.weight` becomes I8 [out, in / 2] (e2m1 codes, element j of a row
in the low nibble of byte j / 2 when j is even, the high nibble when odd) with an F8_E8M0
`<name>.scale` [out, in / 32] (byte e means 2^(e - 127)). Per block of 32 inputs of a row the
scale is 2^ceil(log2(amax / 6)) and each value w / scale goes to the nearest of 0, .5, 1, 1.5, 2,
3, 4, 6 (ties to the even code: .25 -> 0, .75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4,
5 -> 4), negatives alike (code | 8). By default only the routed experts (`mlp.experts.*`) become
FP4; --linears all also turns every other linear DeepInfer takes in FP4 (attention projections
but kv_b_proj, dense and shared MLPs, lm_head; not the embedding or the routers). Everything else
is copied byte for byte; config.json is unchanged (the dtype says what a tensor holds).

--gguf IN.gguf OUT.gguf also writes the llama.cpp-family twin of IN.gguf (the bf16 GGUF of the
same weights from /work/shared/tools/make_bench_model.py) with its routed-expert tensors
blk.N.ffn_{gate,up,down}_exps as GGML's MXFP4 (E2M1 with one E8M0 byte per 32, the same format):
the same codes and scale bytes, bit for bit, repacked into GGML's 17-byte blocks (the scale byte,
then 16 bytes whose low nibble holds element j and high nibble element j + 16 of the block);
general.file_type becomes 38 (MXFP4). Other tensors are copied. For mainline llama.cpp pass OUT
through gguf_for_mainline.py.

Usage: python3 make_fp4_checkpoint.py BF16_DIR OUT_DIR [--linears experts|all]
           [--gguf IN.gguf OUT.gguf]          (numpy; --gguf needs the `gguf` package)
"""
import argparse, os, re, shutil

import numpy as np

from checkpoint_twin import copy_gguf_fields, read_header, write_twin

BLOCK = 32
GRID_MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)
EXPERT = re.compile(r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")
OTHER_LINEAR = re.compile(r"(self_attn\.(q_proj|q_a_proj|q_b_proj|kv_a_proj_with_mqa|o_proj)|"
                          r"mlp\.(shared_experts\.)?(gate|up|down)_proj|eh_proj|shared_head\.head)\.weight$|^lm_head\.weight$")


def quantize(w):
    """w: [rows, cols] float32, cols % 32 == 0 -> (packed uint8 [rows, cols / 2], scale bytes [rows, cols / 32])."""
    rows, cols = w.shape
    blocks = w.reshape(rows, cols // BLOCK, BLOCK)
    amax = np.maximum(np.abs(blocks).max(axis=2).astype(np.float64), 6.0 * 2.0 ** -126)
    # ceil(log2(amax / 6)), exactly: frexp gives amax / 6 = f * 2^e with f in [0.5, 1).
    f, e = np.frexp(amax / 6.0)
    exponent = np.where(f == 0.5, e - 1, e)
    scale_bytes = (exponent + 127).astype(np.uint8)
    scaled = blocks / np.ldexp(np.float32(1), exponent.astype(np.int32))[:, :, None].astype(np.float32)
    a = np.abs(scaled)
    lo = np.searchsorted(GRID_MIDPOINTS, a, side="left")
    hi = np.searchsorted(GRID_MIDPOINTS, a, side="right")
    code = np.where(lo == hi, lo, np.where(lo % 2 == 0, lo, hi)).astype(np.uint8)
    code |= np.where(np.signbit(scaled), 8, 0).astype(np.uint8)
    code = code.reshape(rows, cols)
    return code[:, 0::2] | (code[:, 1::2] << 4), scale_bytes


def to_mxfp4(packed, scale_bytes):
    """DeepInfer's packed rows and scales -> GGML MXFP4 blocks [rows, cols / 32 * 17] (uint8)."""
    rows, nb = scale_bytes.shape
    nib = np.empty((rows, nb * BLOCK), np.uint8)
    nib[:, 0::2], nib[:, 1::2] = packed & 15, packed >> 4
    nib = nib.reshape(rows, nb, BLOCK)
    qs = nib[:, :, :16] | (nib[:, :, 16:] << 4)
    return np.concatenate([scale_bytes[:, :, None], qs], axis=2).reshape(rows, nb * 17)


def write_checkpoint(src, out, linears):
    def plan(name, t):
        fp4 = EXPERT.search(name) or (linears == "all" and OTHER_LINEAR.search(name))
        if not (fp4 and t["dtype"] == "BF16" and len(t["shape"]) == 2 and t["shape"][1] % BLOCK == 0):
            return None
        rows, cols = t["shape"]
        return [(name, "I8", [rows, cols // 2], rows * cols // 2, 0),
                (name[:-len(".weight")] + ".scale", "F8_E8M0", [rows, cols // BLOCK], rows * cols // BLOCK, 1)]

    n_fp4 = write_twin(src, out, plan, quantize)
    shutil.copy(os.path.join(src, "config.json"), out)
    print(f"{out}: {n_fp4} linears in FP4")


def write_gguf(fp4_dir, src_gguf, dst_gguf):
    import gguf
    header, data_start = read_header(os.path.join(fp4_dir, "model.safetensors"))
    mm = np.memmap(os.path.join(fp4_dir, "model.safetensors"), dtype=np.uint8, mode="r")

    def tensor(name):
        t = header[name]
        a, b = t["data_offsets"]
        return mm[data_start + a:data_start + b].reshape(t["shape"])

    def experts(layer, proj):
        blocks = []
        for e in range(10 ** 6):
            p = f"model.layers.{layer}.mlp.experts.{e}.{proj}"
            if p + ".weight" not in header:
                break
            if header[p + ".weight"]["dtype"] != "I8":
                raise SystemExit(f"{fp4_dir}: {p}.weight is not FP4")
            blocks.append(to_mxfp4(tensor(p + ".weight"), tensor(p + ".scale")))
        return np.stack(blocks)

    r = gguf.GGUFReader(src_gguf)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst_gguf, arch, use_temp_file=False)
    copy_gguf_fields(gguf, r, w, {"general.file_type": 38})  # LLAMA_FTYPE_MOSTLY_MXFP4
    kept, n_mx = [], 0
    exps = re.compile(r"blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$")
    for t in r.tensors:
        m = exps.match(t.name)
        if m:
            data = experts(int(m.group(1)), m.group(2) + "_proj")
            want = tuple(int(x) for x in reversed(t.shape))  # GGUF lists ne0 first
            got = data.shape[:-1] + (data.shape[-1] // 17 * BLOCK,)
            if got != want:
                raise SystemExit(f"{t.name}: {src_gguf} holds {want}, the FP4 checkpoint {got}")
            kept.append((t.name, data, gguf.GGMLQuantizationType.MXFP4))
            n_mx += 1
        else:
            kept.append((t.name, t.data, t.tensor_type))
    for name, data, qtype in kept:
        w.add_tensor_info(name, data.shape, data.dtype, data.nbytes, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, data, _ in kept:
        w.write_tensor_data(data)
    w.close()
    print(f"{dst_gguf}: {n_mx} expert tensors in MXFP4 of {len(kept)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--linears", choices=["experts", "all"], default="experts")
    ap.add_argument("--gguf", nargs=2, metavar=("IN_GGUF", "OUT_GGUF"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_checkpoint(args.src, args.out, args.linears)
    if args.gguf:
        write_gguf(args.out, *args.gguf)


if __name__ == "__main__":
    main()
