"""FP4 linears in DeepSeek-V3 checkpoints, end to end: `deepinfer generate` on the FP4 fixture gives
the tokens and logprobs of its bf16 expansion (written by numpy, tests/model/make_fp4_v3_fixture.py);
bench/model/make_fp4_checkpoint.py turns a generated bf16 checkpoint's routed experts into FP4
that loads and generates, and its MXFP4 GGUF holds the same values as the FP4 safetensors, read
back by the `gguf` package's own MXFP4 dequantizer."""
import json
import math
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "models" / "tiny-v3-fp4"
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6])


def generate(deepinfer_bin, model, activations):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(model), "--prompt-ids", "5,17,200,2,9,64,31",
                          "--max-tokens", "8", "--temperature", "0", "--ignore-eos", "--json",
                          "--activation-dtype", activations], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def read_safetensors(path):
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    dtypes = {"BF16": np.uint16, "F32": np.float32, "I8": np.uint8, "F8_E8M0": np.uint8}

    def tensor(name):
        a, b = header[name]["data_offsets"]
        return np.frombuffer(data[8 + n + a:8 + n + b], dtypes[header[name]["dtype"]]).reshape(header[name]["shape"])

    return header, tensor


def dequantize(packed, scales):
    nib = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    nib[:, 0::2], nib[:, 1::2] = packed & 15, packed >> 4
    return E2M1[nib] * np.exp2(np.repeat(scales.astype(np.float64) - 127, 32, axis=1))


@pytest.mark.parametrize("activations", ["f32", "bf16"])
def test_fp4_fixture_generates_as_its_bf16_expansion(deepinfer_bin, activations):
    fp4 = generate(deepinfer_bin, FIXTURE, activations)
    bf16 = generate(deepinfer_bin, FIXTURE.parent / "tiny-v3-fp4-bf16", activations)
    assert len(fp4["output_ids"]) == 8
    assert fp4["output_ids"] == bf16["output_ids"]
    assert fp4["logprobs"] == bf16["logprobs"]


@pytest.fixture(scope="module")
def expert_twin(tmp_path_factory):
    """A generated tiny-v3 checkpoint, the bf16 GGUF of its layer-1 experts, and make_fp4_checkpoint's twins."""
    gguf = pytest.importorskip("gguf")
    base = tmp_path_factory.mktemp("fp4-twin")
    src, out = base / "bf16", base / "fp4"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_checkpoint.py"), str(src), "--preset", "tiny-v3",
                    "--seed", "11"], check=True, capture_output=True, timeout=300)
    header, tensor = read_safetensors(src / "model.safetensors")
    w = gguf.GGUFWriter(str(base / "in.gguf"), "deepseek2")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_tensor("token_embd.weight", tensor("model.embed_tokens.weight"), raw_dtype=gguf.GGMLQuantizationType.BF16)
    for proj, name in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
        stacked = np.stack([tensor(f"model.layers.1.mlp.experts.{e}.{proj}.weight") for e in range(16)])
        w.add_tensor(f"blk.1.{name}.weight", stacked, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    subprocess.run([sys.executable, str(ROOT / "bench" / "model" / "make_fp4_checkpoint.py"), str(src), str(out),
                    "--gguf", str(base / "in.gguf"), str(base / "out.gguf")], check=True, capture_output=True, timeout=300)
    return src, out, base


def test_expert_twin_loads_and_generates(deepinfer_bin, expert_twin):
    src, out, _ = expert_twin
    header, _ = read_safetensors(out / "model.safetensors")
    e = "model.layers.2.mlp.experts.15.down_proj"
    assert header[e + ".weight"]["dtype"] == "I8" and header[e + ".weight"]["shape"] == [256, 32]
    assert header[e + ".scale"]["dtype"] == "F8_E8M0" and header[e + ".scale"]["shape"] == [256, 2]
    for kept in ("model.layers.2.mlp.shared_experts.up_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                 "model.layers.2.mlp.gate.weight", "lm_head.weight"):
        assert header[kept]["dtype"] == "BF16", kept
    assert (out / "model.safetensors").stat().st_size < (src / "model.safetensors").stat().st_size
    result = generate(deepinfer_bin, out, "f32")
    assert len(result["output_ids"]) == 8
    assert all(math.isfinite(lp) and lp <= 0 for lp in result["logprobs"])


def test_mxfp4_gguf_holds_the_fp4_values(expert_twin):
    import gguf
    from gguf import quants
    _, out, base = expert_twin
    _, tensor = read_safetensors(out / "model.safetensors")
    r = gguf.GGUFReader(str(base / "out.gguf"))
    assert r.fields["general.file_type"].contents() == 38
    tensors = {t.name: t for t in r.tensors}
    original = {t.name: t for t in gguf.GGUFReader(str(base / "in.gguf")).tensors}
    assert bytes(tensors["token_embd.weight"].data) == bytes(original["token_embd.weight"].data)
    for proj, name in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
        t = tensors[f"blk.1.{name}.weight"]
        assert t.tensor_type == gguf.GGMLQuantizationType.MXFP4
        for e in (0, 7, 15):
            p = f"model.layers.1.mlp.experts.{e}.{proj}"
            ours = dequantize(tensor(p + ".weight"), tensor(p + ".scale")).astype(np.float32)
            theirs = quants.dequantize(np.asarray(t.data[e]), gguf.GGMLQuantizationType.MXFP4)
            assert np.array_equal(ours, theirs), p


def test_every_linear_in_fp4_loads_and_generates(deepinfer_bin, expert_twin):
    """--linears all puts FP4 weights near the end of the file; loading touches every weight's
    pages, which must count FP4 at half a byte per element (counted at one byte, the pages of one
    of them ran past the end of the mapping and the load crashed)."""
    src, _, base = expert_twin
    out = base / "all"
    subprocess.run([sys.executable, str(ROOT / "bench" / "model" / "make_fp4_checkpoint.py"), str(src), str(out),
                    "--linears", "all"], check=True, capture_output=True, timeout=300)
    header, _ = read_safetensors(out / "model.safetensors")
    end = max(header[k]["data_offsets"][1] for k in header if k != "__metadata__")
    assert any(h["dtype"] == "I8" and h["data_offsets"][1] + (h["data_offsets"][1] - h["data_offsets"][0]) > end + 4096
               for k, h in header.items() if k != "__metadata__")
    result = generate(deepinfer_bin, out, "f32")
    assert len(result["output_ids"]) == 8
    assert all(math.isfinite(lp) and lp <= 0 for lp in result["logprobs"])
