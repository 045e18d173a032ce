"""Tests of tools/make_checkpoint.py (the random DeepSeek checkpoint generator) and its numeric
formats. Checkpoints are read back with tests/tools/st_reader.py, which shares no code with the
generator, and compared with the layouts of the shared fixtures (tests/tools/data/*.layout.json:
config.json and the safetensors header of fixtures/models/tiny-v3, tiny-v3-fp8, tiny-v2)."""
import hashlib
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOOL = ROOT / "tools" / "make_checkpoint.py"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tools"))

import make_checkpoint  # noqa: E402
import weight_formats  # noqa: E402
from st_reader import E4M3_VALUES, ITEM_BYTES, SafetensorsFile, numel  # noqa: E402


def generate(out_dir, *args, check=True):
    """Runs the tool's CLI; returns its summary (the last stdout line, JSON)."""
    proc = subprocess.run([sys.executable, str(TOOL), str(out_dir), *map(str, args)],
                          capture_output=True, text=True)
    if not check:
        return proc
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load_layout(name):
    return json.loads((HERE / "data" / f"{name}.layout.json").read_text())


def open_checkpoint(out_dir):
    """{tensor name: SafetensorsFile holding it}, from the index when sharded."""
    out_dir = pathlib.Path(out_dir)
    index = out_dir / "model.safetensors.index.json"
    if not index.exists():
        f = SafetensorsFile(out_dir / "model.safetensors")
        return {name: f for name in f.names()}
    weight_map = json.loads(index.read_text())["weight_map"]
    files = {name: SafetensorsFile(out_dir / name) for name in sorted(set(weight_map.values()))}
    return {tensor: files[file_name] for tensor, file_name in weight_map.items()}


def expected_names(config, fp8=False, fp8_kv_a=False):
    """Tensor names of a Hugging Face DeepSeek-V2/V3 checkpoint with this config, built here
    independently of the generator."""
    names = ["model.embed_tokens.weight", "model.norm.weight"]
    if not config.get("tie_word_embeddings"):
        names.append("lm_head.weight")
    n_main, n_mtp = config["num_hidden_layers"], config["num_nextn_predict_layers"]
    quantized = []
    for i in range(n_main + n_mtp):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight",
                  p + "self_attn.kv_a_layernorm.weight"]
        attn = ["kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]
        if config["q_lora_rank"] is None:
            attn.append("q_proj")
        else:
            attn += ["q_a_proj", "q_b_proj"]
            names.append(p + "self_attn.q_a_layernorm.weight")
        projs = [p + f"self_attn.{a}.weight" for a in attn]
        moe = (i >= config["first_k_dense_replace"] and i % config["moe_layer_freq"] == 0)
        if moe:
            names.append(p + "mlp.gate.weight")
            if config["topk_method"] == "noaux_tc":
                names.append(p + "mlp.gate.e_score_correction_bias")
            experts = [f"experts.{e}." for e in range(config["n_routed_experts"])]
            if config["n_shared_experts"]:
                experts.append("shared_experts.")
            projs += [f"{p}mlp.{e}{m}.weight" for e in experts
                      for m in ("gate_proj", "up_proj", "down_proj")]
        else:
            projs += [f"{p}mlp.{m}.weight" for m in ("gate_proj", "up_proj", "down_proj")]
        if i >= n_main:
            names += [p + "embed_tokens.weight", p + "enorm.weight", p + "hnorm.weight",
                      p + "eh_proj.weight", p + "shared_head.norm.weight",
                      p + "shared_head.head.weight"]
        names += projs
        quantized += [n for n in projs if fp8 and (fp8_kv_a or "kv_a_proj_with_mqa" not in n)]
    names += [n + "_scale_inv" for n in quantized]
    return sorted(names)


def check_file_format(path):
    """Header well-formed, offsets contiguous in header order from 0 to the end of the file,
    dtype x shape = byte length; returns the parsed file."""
    f = SafetensorsFile(path)
    assert len(f.raw_header) % 8 == 0
    stripped = f.raw_header.rstrip(b" ")
    assert stripped.endswith(b"}") and len(f.raw_header) - len(stripped) < 8
    assert f.metadata == {"format": "pt"}
    offset = 0
    for name in f.names():
        e = f.entry(name)
        assert set(e) == {"dtype", "shape", "data_offsets"}, name
        begin, end = e["data_offsets"]
        assert begin == offset, name
        assert end - begin == numel(e["shape"]) * ITEM_BYTES[e["dtype"]], name
        offset = end
    assert f.data_start + offset == os.path.getsize(path)
    assert f.names() == sorted(f.names())
    return f


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Checkpoints shared by the tests: name -> (folder, summary)."""
    base = tmp_path_factory.mktemp("ckpt")
    runs = {
        "v3": ["--preset", "tiny-v3", "--seed", "7"],
        "v3_again": ["--preset", "tiny-v3", "--seed", "7"],
        "v3_seed8": ["--preset", "tiny-v3", "--seed", "8"],
        "v3_fp8": ["--preset", "tiny-v3", "--seed", "7", "--dtype", "fp8"],
        "v3_sharded": ["--preset", "tiny-v3", "--seed", "7", "--shards", "3"],
        "v2": ["--preset", "tiny-v2"],
    }
    return {name: (base / name, generate(base / name, *args)) for name, args in runs.items()}


# --- numeric formats -----------------------------------------------------------------------

def test_e4m3_exhaustive_table():
    """Every code's value (by the definition) encodes back to that code; NaN to 0x7F/0xFF; the
    generator's decode table is the definition's."""
    codes = np.arange(256, dtype=np.uint8)
    finite = ~np.isnan(E4M3_VALUES)
    assert finite.sum() == 254 and E4M3_VALUES[0x7E] == 448.0 and E4M3_VALUES[1] == 2.0 ** -9
    encoded = weight_formats.e4m3_encode(E4M3_VALUES.astype(np.float32))
    np.testing.assert_array_equal(encoded[finite], codes[finite])
    assert list(weight_formats.e4m3_encode(np.float32([np.nan, -np.nan]))) == [0x7F, 0xFF]
    table = weight_formats.e4m3_table().astype(np.float64)
    np.testing.assert_array_equal(np.isnan(table), ~finite)
    np.testing.assert_array_equal(table[finite], E4M3_VALUES[finite])
    np.testing.assert_array_equal(np.signbit(table[finite]), np.signbit(E4M3_VALUES[finite]))


def reference_e4m3(x):
    """Nearest finite E4M3 value by exhaustive search, ties to the even code, saturating."""
    if math.isnan(x):
        return 0xFF if math.copysign(1.0, x) < 0 else 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    mag = min(abs(x), 448.0)
    distances = np.abs(E4M3_VALUES[:0x7F] - mag)
    best = np.flatnonzero(distances == distances.min())
    if len(best) > 1:
        best = [c for c in best if c % 2 == 0]
    return int(best[0]) | sign


def test_e4m3_rounding_matches_exhaustive_search():
    rng = np.random.default_rng(0)
    positive = E4M3_VALUES[:0x7F]
    mids = ((positive[1:] + positive[:-1]) / 2).astype(np.float32)  # exact in float32
    samples = [
        (rng.standard_normal(20000) * np.exp2(rng.uniform(-13, 10, 20000))).astype(np.float32),
        mids, -mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(1e9)),
        np.float32([0.0, -0.0, 448.0, 449.0, 464.0, 465.0, 1e30, -1e30, np.inf, -np.inf,
                    2.0 ** -10, 2.0 ** -11, 3 * 2.0 ** -11, 1e-30]),
    ]
    x = np.concatenate(samples)
    got = weight_formats.e4m3_encode(x)
    want = np.array([reference_e4m3(float(v)) for v in x], dtype=np.uint8)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(x[i]), int(got[i]), int(want[i])) for i in bad[:5]]
    # Ties go to the even mantissa; beyond 448 saturates.
    assert all(int(c) % 2 == 0 for c in weight_formats.e4m3_encode(mids))
    assert list(weight_formats.e4m3_encode(np.float32([1e6, -np.inf]))) == [0x7E, 0xFE]


def test_bf16_rounding_is_nearest_even():
    x = np.array([1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -20, -2.5],
                 dtype=np.float32)
    want = [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020]
    assert list(weight_formats.bf16_bits(x)) == want


def test_block_quantization_partial_edges():
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((300, 200)) * 0.05).astype(np.float32)
    codes, scale_inv = weight_formats.quantize_blocks(w, 128, 128)
    assert codes.shape == (300, 200) and scale_inv.shape == (3, 2)
    values = E4M3_VALUES[codes].reshape(300, 200)
    for bi in range(3):
        for bj in range(2):
            block = (slice(bi * 128, (bi + 1) * 128), slice(bj * 128, (bj + 1) * 128))
            amax = np.abs(w[block]).max()
            assert scale_inv[bi, bj] == np.float32(amax / np.float32(448.0))
            assert np.abs(values[block]).max() == 448.0
            err = np.abs(values[block] * scale_inv[bi, bj] - w[block])
            assert np.all(err <= np.abs(w[block]) / 16 + scale_inv[bi, bj] * 2.0 ** -10)


# --- checkpoints ----------------------------------------------------------------------------

@pytest.mark.parametrize("run,fixture", [("v3", "tiny-v3"), ("v3_fp8", "tiny-v3-fp8"),
                                         ("v2", "tiny-v2")])
def test_matches_fixture_layout(made, run, fixture):
    """Same config -> the same config.json, tensor names, dtypes and shapes as the fixture; even
    the safetensors header bytes agree (same sorted order and packing)."""
    out_dir, summary = made[run]
    layout = load_layout(fixture)
    assert json.loads((out_dir / "config.json").read_text()) == layout["config"]
    f = check_file_format(out_dir / "model.safetensors")
    got = {name: [f.entry(name)["dtype"], f.entry(name)["shape"]] for name in f.names()}
    assert got == layout["tensors"]
    assert hashlib.sha256(f.raw_header).hexdigest() == layout["header_sha256"]
    assert os.path.getsize(out_dir / "model.safetensors") == layout["file_bytes"]
    assert summary["bytes"] == layout["file_bytes"]
    gen = json.loads((out_dir / "generation_config.json").read_text())
    assert gen == {"bos_token_id": 0, "eos_token_id": 1, "do_sample": False}


def test_names_and_shapes_from_config(tmp_path):
    """A shape that exercises every branch: MoE every other layer, no shared experts, tied
    embeddings, greedy routing (no correction bias), low-rank query, odd sizes, MTP."""
    sets = ["hidden_size=160", "num_attention_heads=3", "q_lora_rank=96", "kv_lora_rank=72",
            "qk_nope_head_dim=24", "qk_rope_head_dim=16", "v_head_dim=40", "n_routed_experts=6",
            "n_group=1", "topk_group=1", "num_experts_per_tok=2", "topk_method=greedy",
            "scoring_func=softmax", "n_shared_experts=0", "moe_layer_freq=2",
            "first_k_dense_replace=1", "tie_word_embeddings=true", "vocab_size=300",
            "moe_intermediate_size=48", "intermediate_size=200"]
    args = ["--layers", "4", "--mtp"] + [a for s in sets for a in ("--set", s)]
    summary = generate(tmp_path, *args)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["num_nextn_predict_layers"] == 1 and config["tie_word_embeddings"] is True
    f = check_file_format(tmp_path / "model.safetensors")
    assert f.names() == expected_names(config)
    shape = lambda name: f.entry(name)["shape"]  # noqa: E731
    H = 3
    assert shape("model.layers.0.self_attn.q_a_proj.weight") == [96, 160]
    assert shape("model.layers.0.self_attn.q_b_proj.weight") == [H * (24 + 16), 96]
    assert shape("model.layers.0.self_attn.kv_a_proj_with_mqa.weight") == [72 + 16, 160]
    assert shape("model.layers.0.self_attn.kv_b_proj.weight") == [H * (24 + 40), 72]
    assert shape("model.layers.0.self_attn.o_proj.weight") == [160, H * 40]
    assert shape("model.layers.0.mlp.gate_proj.weight") == [200, 160]
    assert shape("model.layers.2.mlp.experts.5.down_proj.weight") == [160, 48]
    assert shape("model.layers.2.mlp.gate.weight") == [6, 160]
    assert "model.layers.1.mlp.gate_proj.weight" in f.header  # odd layer stays dense
    assert "model.layers.3.mlp.down_proj.weight" in f.header
    assert "model.layers.4.mlp.gate.weight" in f.header  # MTP layer 4 is MoE by the same rule
    assert shape("model.layers.4.eh_proj.weight") == [160, 320]
    assert shape("model.layers.4.shared_head.head.weight") == [300, 160]
    # MTP copies hold the main embedding's values (tied: the head is the embedding too).
    emb = f.raw("model.embed_tokens.weight")
    assert f.raw("model.layers.4.embed_tokens.weight") == emb
    assert f.raw("model.layers.4.shared_head.head.weight") == emb
    assert summary["parameters"] == sum(numel(f.entry(n)["shape"]) for n in f.names())
    assert summary["tensors"] == len(f.names())


def test_v2_lite_preset_shapes():
    config, dtype = make_checkpoint.build_config("v2-lite", layers=2)
    assert dtype == "bf16"
    want = {"hidden_size": 2048, "num_attention_heads": 16, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
            "n_routed_experts": 64, "moe_intermediate_size": 1408, "num_experts_per_tok": 6,
            "n_shared_experts": 2, "vocab_size": 102400, "q_lora_rank": None,
            "scoring_func": "softmax", "topk_method": "greedy", "norm_topk_prob": False,
            "routed_scaling_factor": 1.0, "first_k_dense_replace": 1, "intermediate_size": 10944,
            "num_hidden_layers": 2, "model_type": "deepseek_v2"}
    assert {k: config[k] for k in want} == want
    weights = {w.name: w.shape for w in make_checkpoint.model_weights(config)}
    assert sorted(weights) == expected_names(config)
    assert weights["model.layers.1.self_attn.kv_b_proj.weight"] == (16 * 256, 512)
    assert weights["model.layers.1.mlp.shared_experts.up_proj.weight"] == (2 * 1408, 2048)
    assert sum(math.prod(s) for s in weights.values()) == 1085287424


def test_sharded_index_consistent(made):
    single = open_checkpoint(made["v3"][0])
    out_dir, summary = made["v3_sharded"]
    index = json.loads((out_dir / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert files == [f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)]
    assert not (out_dir / "model.safetensors").exists()
    data_bytes, seen = 0, {}
    for name in files:
        f = check_file_format(out_dir / name)
        for tensor in f.names():
            assert index["weight_map"][tensor] == name
            seen[tensor] = f
            data_bytes += len(f.raw(tensor))
    assert set(seen) == set(index["weight_map"]) == set(single)
    assert index["metadata"]["total_size"] == data_bytes
    assert summary["bytes"] == sum(os.path.getsize(out_dir / n) for n in files)
    # Sharding moves tensors between files, never changes them.
    for tensor, f in seen.items():
        assert f.raw(tensor) == single[tensor].raw(tensor), tensor


def test_deterministic_in_seed(made):
    a = (made["v3"][0] / "model.safetensors").read_bytes()
    assert a == (made["v3_again"][0] / "model.safetensors").read_bytes()
    other = SafetensorsFile(made["v3_seed8"][0] / "model.safetensors")
    base = SafetensorsFile(made["v3"][0] / "model.safetensors")
    assert other.raw_header == base.raw_header
    assert all(other.raw(n) != base.raw(n) for n in base.names())


def test_chunked_generation_does_not_change_values(made, tmp_path, monkeypatch):
    """Small generation steps (as for real-sized tensors) give the same bytes."""
    monkeypatch.setattr(make_checkpoint, "CHUNK_ELEMENTS", 1000)
    config, _ = make_checkpoint.build_config("tiny-v3")
    make_checkpoint.make_checkpoint(str(tmp_path), config, "bf16", seed=7)
    assert ((tmp_path / "model.safetensors").read_bytes()
            == (made["v3"][0] / "model.safetensors").read_bytes())


def test_fp8_quantization(made):
    """Scale shapes, dtypes, block maxima at 448, and dequantized weights close to the bf16
    checkpoint of the same seed."""
    fp8 = SafetensorsFile(made["v3_fp8"][0] / "model.safetensors")
    bf16 = SafetensorsFile(made["v3"][0] / "model.safetensors")
    config = json.loads((made["v3_fp8"][0] / "config.json").read_text())
    assert config["quantization_config"] == {"activation_scheme": "dynamic", "fmt": "e4m3",
                                             "quant_method": "fp8", "weight_block_size": [128, 128]}
    quantized = [n for n in fp8.names() if fp8.entry(n)["dtype"] == "F8_E4M3"]
    assert len(quantized) == 117
    for name in fp8.names():
        if name.endswith("_scale_inv"):
            continue
        is_proj = name.endswith("_proj.weight") and "kv_a_proj_with_mqa" not in name
        assert (fp8.entry(name)["dtype"] == "F8_E4M3") == is_proj, name
        if not is_proj:
            assert fp8.raw(name) == bf16.raw(name), name  # unquantized tensors are identical
    worst = 0.0
    for name in quantized:
        rows, cols = fp8.entry(name)["shape"]
        scale = fp8.values(name + "_scale_inv")
        assert fp8.entry(name + "_scale_inv")["dtype"] == "F32"
        assert list(scale.shape) == [math.ceil(rows / 128), math.ceil(cols / 128)]
        codes = fp8.values(name)
        assert not np.any((codes & 0x7F) == 0x7F)  # no NaN codes
        values = E4M3_VALUES[codes]
        full = np.repeat(np.repeat(scale, 128, 0)[:rows], 128, 1)[:, :cols]
        dequant = values * full
        ref = bf16.values(name).astype(np.float64)
        # e4m3 keeps 4 significant bits (relative error <= 2^-4), bf16 8 (<= 2^-8);
        # subnormal e4m3 steps are 2^-9 * scale.
        bound = np.abs(ref) * (2.0 ** -4 + 2.0 ** -7) + full * 2.0 ** -9
        assert np.all(np.abs(dequant - ref) <= bound), name
        worst = max(worst, float(np.abs(dequant - ref).max() / np.abs(ref).max()))
        for bi in range(scale.shape[0]):
            for bj in range(scale.shape[1]):
                block = values[bi * 128:(bi + 1) * 128, bj * 128:(bj + 1) * 128]
                assert np.abs(block).max() == 448.0
    assert worst < 2.0 ** -4


def test_fp8_kv_a_proj_option(tmp_path):
    generate(tmp_path, "--dtype", "fp8", "--fp8-kv-a-proj", "--layers", "1")
    f = check_file_format(tmp_path / "model.safetensors")
    config = json.loads((tmp_path / "config.json").read_text())
    assert f.names() == expected_names(config, fp8=True, fp8_kv_a=True)
    assert f.entry("model.layers.0.self_attn.kv_a_proj_with_mqa.weight")["dtype"] == "F8_E4M3"
    scale = f.entry("model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv")
    assert scale["shape"] == [2, 2]  # [160, 256] in 128-blocks


def test_fp8_lm_head_option(made, tmp_path):
    """--fp8-lm-head quantizes lm_head from the bf16 checkpoint's values of the seed (what the
    engine's --lm-head-dtype fp8 does at load): the codes and scales of weight_formats'
    quantize_blocks on those bf16 values; every other tensor is the plain fp8 checkpoint's."""
    generate(tmp_path, "--preset", "tiny-v3", "--seed", "7", "--dtype", "fp8", "--fp8-lm-head")
    f = check_file_format(tmp_path / "model.safetensors")
    plain = SafetensorsFile(made["v3_fp8"][0] / "model.safetensors")
    bf16 = SafetensorsFile(made["v3"][0] / "model.safetensors")
    assert f.names() == sorted(plain.names() + ["lm_head.weight_scale_inv"])
    assert f.entry("lm_head.weight")["dtype"] == "F8_E4M3"
    codes, scale = weight_formats.quantize_blocks(bf16.values("lm_head.weight").astype(np.float32))
    assert np.array_equal(f.values("lm_head.weight"), codes)
    assert np.array_equal(f.values("lm_head.weight_scale_inv"), scale)
    for name in plain.names():
        if name != "lm_head.weight":
            assert f.raw(name) == plain.raw(name), name


def test_weight_statistics(made):
    f = SafetensorsFile(made["v3"][0] / "model.safetensors")
    for name in f.names():
        x = f.values(name).astype(np.float64)
        assert np.all(np.isfinite(x)), name
        if name.endswith("norm.weight"):
            assert abs(x.mean() - 1.0) < 0.05 and 0.05 < x.std() < 0.15, name
        elif name.endswith("_proj.weight") and x.size >= 4096:
            fan_in = x.shape[1]
            std = x.std() * math.sqrt(fan_in)
            residual = name.endswith(("o_proj.weight", "down_proj.weight"))
            gain = 1 / math.sqrt(2 * 3) if residual else 1.0  # 3 layers
            assert abs(std / gain - 1.0) < 0.05, (name, std)
            assert abs(x.mean()) < 0.1 * x.std(), name


def test_tokenizer_copy_and_vocab(tmp_path):
    tok = tmp_path / "tok"
    tok.mkdir()
    vocab = {f"t{i}": i for i in range(500)}
    added = [{"id": 0, "content": "<s>", "special": True},
             {"id": 700, "content": "<bos>", "special": True},
             {"id": 701, "content": "<eos>", "special": True}]
    (tok / "tokenizer.json").write_text(json.dumps(
        {"version": "1.0", "added_tokens": added, "model": {"type": "BPE", "vocab": vocab,
                                                            "merges": []}}))
    (tok / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": {"content": "<bos>"}, "eos_token": "<eos>"}))
    out = tmp_path / "out"
    generate(out, "--tokenizer", tok, "--layers", "1")
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == 702
    assert (config["bos_token_id"], config["eos_token_id"]) == (700, 701)
    gen = json.loads((out / "generation_config.json").read_text())
    assert (gen["bos_token_id"], gen["eos_token_id"]) == (700, 701)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (tok / name).read_bytes()
    f = SafetensorsFile(out / "model.safetensors")
    assert f.entry("model.embed_tokens.weight")["shape"] == [702, 256]
    assert f.entry("lm_head.weight")["shape"] == [702, 256]
    # An explicit larger vocabulary is kept (padding); a smaller one is refused.
    generate(out, "--tokenizer", tok, "--layers", "1", "--set", "vocab_size=768")
    assert json.loads((out / "config.json").read_text())["vocab_size"] == 768
    proc = generate(out, "--tokenizer", tok, "--set", "vocab_size=600", check=False)
    assert proc.returncode != 0 and "smaller than the tokenizer" in proc.stderr


def test_overrides_and_stale_shards(tmp_path):
    cfg = tmp_path / "in.json"
    cfg.write_text(json.dumps({"hidden_size": 128, "num_hidden_layers": 2}))
    generate(tmp_path / "out", "--shards", "2", "--config-json", cfg)
    summary = generate(tmp_path / "out", "--config-json", cfg, "--set", "rope_scaling.factor=4",
                       "--set", "q_lora_rank=null", "--layers", "1")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["hidden_size"] == 128 and config["num_hidden_layers"] == 1
    assert config["rope_scaling"]["factor"] == 4 and config["rope_scaling"]["type"] == "yarn"
    assert config["q_lora_rank"] is None
    left = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert left == ["config.json", "generation_config.json", "model.safetensors"]
    assert summary["files"] == 1 and summary["layers"] == 1
    for bad in (["--set", "num_experts_per_tok=99"], ["--set", "topk_method=noaux"],
                ["--set", "n_group=3"], ["--set", "qk_rope_head_dim=7"], ["--shards", "0"]):
        proc = generate(tmp_path / "bad", *bad, check=False)
        assert proc.returncode == 2, bad


def test_fp8_block_size_from_config_and_mtp(tmp_path):
    """A config with an fp8 quantization_config makes fp8 the default dtype and sets the block
    size; MTP layers quantize their projections but keep eh_proj BF16."""
    cfg = tmp_path / "in.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 1, "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [64, 32]}}))
    summary = generate(tmp_path / "out", "--config-json", cfg, "--mtp")
    assert summary["dtype"] == "fp8" and summary["mtp_layers"] == 1
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["quantization_config"] == {"activation_scheme": "dynamic", "fmt": "e4m3",
                                             "quant_method": "fp8", "weight_block_size": [64, 32]}
    f = check_file_format(tmp_path / "out" / "model.safetensors")
    assert f.names() == expected_names(config, fp8=True)
    assert f.entry("model.layers.0.self_attn.kv_b_proj.weight_scale_inv")["shape"] == [8, 4]
    assert f.entry("model.layers.1.mlp.experts.0.down_proj.weight_scale_inv")["shape"] == [4, 2]
    assert f.entry("model.layers.1.eh_proj.weight")["dtype"] == "BF16"
    codes = f.values("model.layers.1.self_attn.o_proj.weight")
    scale = f.values("model.layers.1.self_attn.o_proj.weight_scale_inv")
    assert scale.shape == (4, 8) and np.abs(E4M3_VALUES[codes[:64, :32]]).max() == 448.0
