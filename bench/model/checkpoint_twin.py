"""What the benchmark checkpoint tools share: reading a safetensors header, writing a twin of a
bf16 checkpoint in which some tensors are replaced by a quantized weight and its scales, and
copying a GGUF's metadata into a new file. Imported by make_fp8_checkpoint.py,
make_fp4_checkpoint.py and gguf_for_mainline.py (numpy; the GGUF helper takes the `gguf` module)."""
import json
import os
import shutil
import struct

import numpy as np


def read_header(path):
    """(header dict, offset of the data section) of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def bf16_to_f32(raw, shape):
    return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)


def write_twin(src, out, plan_tensor, quantize):
    """Writes out/model.safetensors from src/model.safetensors. plan_tensor(name, header entry)
    returns None to copy the tensor byte for byte, or [(new name, dtype, shape, nbytes, part)]:
    part 0 and 1 are the two arrays quantize(f32 weight [rows, cols]) returns (values, scales).
    Copies generation_config.json and the tokenizer files; returns how many tensors were
    quantized. config.json is the caller's."""
    src_st = os.path.join(src, "model.safetensors")
    if not os.path.exists(src_st):
        raise SystemExit(f"{src}: needs one model.safetensors (sharded checkpoints are not read)")
    header, data_start = read_header(src_st)
    header.pop("__metadata__", None)
    plan = []  # (name, dtype, shape, nbytes, source name, part or None)
    for name in sorted(header, key=lambda n: header[n]["data_offsets"][0]):
        t = header[name]
        parts = plan_tensor(name, t)
        if parts is None:
            plan.append((name, t["dtype"], t["shape"], t["data_offsets"][1] - t["data_offsets"][0], name, None))
        else:
            plan.extend((new, dtype, shape, nbytes, name, part) for new, dtype, shape, nbytes, part in parts)
    new_header, off = {}, 0
    for name, dtype, shape, nbytes, _, _ in plan:
        new_header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    new_header["__metadata__"] = {"format": "pt"}
    h = json.dumps(new_header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    mm = np.memmap(src_st, dtype=np.uint8, mode="r")
    cache, n_quantized = {}, 0
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, _, srcname, part in plan:
            a, b = header[srcname]["data_offsets"]
            raw = mm[data_start + a:data_start + b]
            if part is None:
                f.write(raw.tobytes())
                continue
            if srcname not in cache:  # a tensor's parts are planned together: keep one at a time
                cache.clear()
                cache[srcname] = quantize(bf16_to_f32(raw, header[srcname]["shape"]))
                n_quantized += 1
            f.write(cache[srcname][part].tobytes())
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            shutil.copy(os.path.join(src, extra), out)
    return n_quantized


def copy_gguf_fields(gguf, reader, writer, override=None):
    """Every metadata field of reader into writer (not the GGUF.* bookkeeping or the architecture,
    which GGUFWriter writes itself), with override[name] in place of a field's value."""
    override = override or {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, override.get(name, field.contents()), vtype, sub_type=sub)
