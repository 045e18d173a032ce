#!/usr/bin/env python3
"""Rewrites a DeepSeek-2 GGUF from the shared benchmark generator into the layout mainline
llama.cpp loads as MLA: the split attn_k_b [n_head, kv_lora_rank, nope] and attn_v_b
[n_head, v, kv_lora_rank] as 3-D tensors, no attn_kv_b, and the MLA head sizes (key/value length
576/512 for the latent, key_length_mla/value_length_mla 192/128, one KV head). ik_llama.cpp reads
the generator's file as it is. Weights are copied byte for byte.

Usage: python3 gguf_for_mainline.py IN.gguf OUT.gguf    (needs the `gguf` package)
"""
import sys

import gguf

from checkpoint_twin import copy_gguf_fields


def main(src, dst):
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    get = lambda key: r.fields[f"{arch}.{key}"].contents()
    n_head, kv_lora, rope = get("attention.head_count"), get("attention.kv_lora_rank"), get("rope.dimension_count")
    key_mla, value_mla = get("attention.key_length"), get("attention.value_length")
    override = {f"{arch}.attention.key_length": kv_lora + rope, f"{arch}.attention.value_length": kv_lora,
                f"{arch}.attention.head_count_kv": 1}
    w = gguf.GGUFWriter(dst, arch, use_temp_file=False)
    copy_gguf_fields(gguf, r, w, override)
    w.add_uint32(f"{arch}.attention.key_length_mla", key_mla)
    w.add_uint32(f"{arch}.attention.value_length_mla", value_mla)
    kept = []
    for t in r.tensors:
        if t.name.endswith("attn_kv_b.weight"):
            continue
        data = t.data  # raw bytes for bf16 and block types: the last dimension counts bytes
        if t.name.endswith("attn_k_b.weight"):
            data = data.reshape(n_head, kv_lora, -1)
        elif t.name.endswith("attn_v_b.weight"):
            data = data.reshape(n_head, value_mla, -1)
        kept.append((t, data))
    for t, data in kept:
        w.add_tensor_info(t.name, data.shape, data.dtype, t.n_bytes, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, data in kept:
        w.write_tensor_data(data)
    w.close()
    print(f"{dst}: {len(kept)} of {len(r.tensors)} tensors")


if __name__ == "__main__":
    main(*sys.argv[1:3])
