#!/usr/bin/env python3
"""Reference values for DeepSeek-V3's multi-token-prediction (MTP) layer: writes
DIR/golden_mtp.json for a DeepSeek-V3 checkpoint with num_nextn_predict_layers >= 1, for
tests/model/deepseek_mtp_test.cpp. The checkpoint in tests/data/models/tiny-v3-mtp is
`tools/make_checkpoint.py tests/data/models/tiny-v3-mtp --preset tiny-v3 --layers 2 --mtp`.

Usage: .venv/bin/python tests/model/deepseek_mtp_reference.py tests/data/models/tiny-v3-mtp

All in float64 numpy on the stored bf16 weights, written from the published descriptions:
- The main model as DeepSeek-V3's inference/model.py computes it: MLA (low-rank query, latent KV
  with kv_a_layernorm, a decoupled RoPE key shared by the heads, RoPE on interleaved pairs with
  YaRN frequencies and the mscale^2 softmax scale), DeepSeekMoE (sigmoid scores plus
  e_score_correction_bias for the choice, group-limited top-k, weights from the raw scores,
  normalized and scaled by routed_scaling_factor, plus the shared expert), RMSNorm. Before anything
  is written, this code is checked against tests/data/models/tiny-v3/golden.json (DeepSeek's own
  reference outputs): greedy ids and top-5 logprobs within 2e-3.
- The MTP layer model.layers.{num_hidden_layers} as the DeepSeek-V3 technical report (section
  2.2, Multi-Token Prediction) describes it and as vLLM (vllm/model_executor/models/
  deepseek_mtp.py, DeepSeekMultiTokenPredictorLayer) and SGLang (python/sglang/srt/models/
  deepseek_nextn.py) run it: for position i, h'_i = eh_proj([enorm(embed(t_{i+1})) ; hnorm(h_i)])
  with h_i the main model's last hidden state after its final norm (the embedding half first, as
  both implementations concatenate: the published eh_proj weights are laid out that way, though
  the report writes the other order); one decoder layer with that index's weights, its attention
  causal over the layer's own positions 0 .. i with RoPE at i; logits = shared_head.head(
  shared_head.norm(.)), predicting t_{i+2}. The embedding at position 0 is not zeroed (vLLM does,
  SGLang and the report do not).

Chained drafts (k > 1) follow vLLM's proposer: the next pair's h is the layer's own output before
shared_head.norm, its token the draft.

golden_mtp.json: {"reference", "checkpoint", "cases": [{"ids", "positions": [{"t", "top5":
[[id, logprob] x 5], "target_logprob" (of ids[t+2], null past the end), "margin" (top-1 minus
top-2 logit), "chain" (3 chained greedy drafts from pair t), "chain_margins"}]}]},
t = 0 .. len(ids) - 2.
"""
import json
import math
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "tools"))
from st_reader import SafetensorsFile  # noqa: E402


class Model:
    def __init__(self, model_dir):
        self.cfg = json.loads((pathlib.Path(model_dir) / "config.json").read_text())
        self.st = SafetensorsFile(str(pathlib.Path(model_dir) / "model.safetensors"))
        self.cache = {}
        c = self.cfg
        assert c.get("quantization_config") is None, "bf16/f32 checkpoints only"
        assert c["scoring_func"] == "sigmoid" and c["topk_method"] == "noaux_tc", "the V3 router only"
        self.eps = c["rms_norm_eps"]
        dim, base = c["qk_rope_head_dim"], c["rope_theta"]
        freqs = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        self.softmax_scale = (c["qk_nope_head_dim"] + dim) ** -0.5
        rs = c.get("rope_scaling")
        if rs:
            factor, orig = rs["factor"], rs["original_max_position_embeddings"]

            def correction_dim(n_rot):
                return dim * math.log(orig / (n_rot * 2 * math.pi)) / (2 * math.log(base))

            low = max(math.floor(correction_dim(rs["beta_fast"])), 0)
            high = min(math.ceil(correction_dim(rs["beta_slow"])), dim - 1)
            if low == high:
                high += 0.001
            ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
            smooth = 1 - ramp
            freqs = freqs / factor * (1 - smooth) + freqs * smooth
            mscale = 0.1 * rs.get("mscale_all_dim", 1.0) * math.log(factor) + 1.0
            self.softmax_scale *= mscale * mscale
        self.freqs = freqs

    def w(self, name):
        if name not in self.cache:
            self.cache[name] = self.st.values(name).astype(np.float64)
        return self.cache[name]

    def norm(self, x, name):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * self.w(name)

    def rope(self, x, pos):  # x [T, ..., dim], interleaved pairs rotated by pos * freqs
        angle = pos.astype(np.float64)[:, None] * self.freqs[None, :]
        shape = (len(pos),) + (1,) * (x.ndim - 2) + (len(self.freqs),)
        cos, sin = np.cos(angle).reshape(shape), np.sin(angle).reshape(shape)
        re, im = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = re * cos - im * sin
        out[..., 1::2] = re * sin + im * cos
        return out

    def attention(self, p, x, pos):
        c = self.cfg
        H, nope, rd, vd, lat = (c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                                c["v_head_dim"], c["kv_lora_rank"])
        T = x.shape[0]
        if c.get("q_lora_rank"):
            q = self.norm(x @ self.w(p + "q_a_proj.weight").T, p + "q_a_layernorm.weight") @ self.w(p + "q_b_proj.weight").T
        else:
            q = x @ self.w(p + "q_proj.weight").T
        q = q.reshape(T, H, nope + rd)
        q_nope, q_pe = q[..., :nope], self.rope(q[..., nope:], pos)
        kv = x @ self.w(p + "kv_a_proj_with_mqa.weight").T
        latent = self.norm(kv[:, :lat], p + "kv_a_layernorm.weight")
        k_pe = self.rope(kv[:, lat:], pos)
        kv = (latent @ self.w(p + "kv_b_proj.weight").T).reshape(T, H, nope + vd)
        k_nope, v = kv[..., :nope], kv[..., nope:]
        scores = (np.einsum("ihd,jhd->hij", q_nope, k_nope) + np.einsum("ihd,jd->hij", q_pe, k_pe)) * self.softmax_scale
        scores = np.where(np.tril(np.ones((T, T), dtype=bool))[None], scores, -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        o = np.einsum("hij,jhd->ihd", scores, v).reshape(T, H * vd)
        return o @ self.w(p + "o_proj.weight").T

    def mlp(self, p, x):
        g, u = x @ self.w(p + "gate_proj.weight").T, x @ self.w(p + "up_proj.weight").T
        return (g / (1 + np.exp(-g)) * u) @ self.w(p + "down_proj.weight").T

    def moe(self, p, x):
        c = self.cfg
        E, k, G, topk_group = c["n_routed_experts"], c["num_experts_per_tok"], c["n_group"], c["topk_group"]
        scores = 1 / (1 + np.exp(-(x @ self.w(p + "mlp.gate.weight").T)))
        biased = scores + self.w(p + "mlp.gate.e_score_correction_bias")
        out = np.zeros_like(x)
        for r in range(x.shape[0]):
            groups = biased[r].reshape(G, E // G)
            group_score = np.sort(groups, axis=-1)[:, -2:].sum(-1)
            keep = np.argsort(-group_score, kind="stable")[:topk_group]
            masked = np.full(E, -np.inf)
            for g in keep:
                masked[g * (E // G):(g + 1) * (E // G)] = biased[r, g * (E // G):(g + 1) * (E // G)]
            chosen = np.argsort(-masked, kind="stable")[:k]
            weights = scores[r, chosen]
            if c.get("norm_topk_prob", True):
                weights = weights / weights.sum()
            weights = weights * c["routed_scaling_factor"]
            for e, wt in zip(chosen, weights):
                out[r] += wt * self.mlp(f"{p}mlp.experts.{e}.", x[r:r + 1])[0]
        if c.get("n_shared_experts"):
            out += self.mlp(p + "mlp.shared_experts.", x)
        return out

    def layer(self, i, x, pos):
        c, p = self.cfg, f"model.layers.{i}."
        x = x + self.attention(p + "self_attn.", self.norm(x, p + "input_layernorm.weight"), pos)
        h = self.norm(x, p + "post_attention_layernorm.weight")
        moe = c["n_routed_experts"] and i >= c["first_k_dense_replace"] and i % c["moe_layer_freq"] == 0
        return x + (self.moe(p, h) if moe else self.mlp(p + "mlp.", h))

    def hidden(self, ids):
        """The main model's last hidden state after the final norm, [len(ids), hidden]."""
        x = self.w("model.embed_tokens.weight")[np.asarray(ids)]
        pos = np.arange(len(ids))
        for i in range(self.cfg["num_hidden_layers"]):
            x = self.layer(i, x, pos)
        return self.norm(x, "model.norm.weight")

    def logits(self, ids):
        return self.hidden(ids) @ self.w("lm_head.weight").T

    def mtp_layer(self, h, tokens):
        """The MTP layer over pairs (h[i], tokens[i]), i = 0 .. n-1, causal: (its output before
        shared_head.norm, logits)."""
        L = self.cfg["num_hidden_layers"]
        p = f"model.layers.{L}."
        e = self.w("model.embed_tokens.weight")[np.asarray(tokens)]
        x = np.concatenate([self.norm(e, p + "enorm.weight"), self.norm(h, p + "hnorm.weight")], axis=-1)
        x = self.layer(L, x @ self.w(p + "eh_proj.weight").T, np.arange(len(tokens)))
        return x, self.norm(x, p + "shared_head.norm.weight") @ self.w(p + "shared_head.head.weight").T

    def mtp_logits(self, ids):
        """Row t: the MTP layer's logits for the pair (h_t, ids[t+1]), t = 0 .. len(ids) - 2."""
        return self.mtp_layer(self.hidden(ids[:-1]), ids[1:])[1]

    def mtp_chain(self, ids, t, k):
        """k greedy drafts after ids[0 .. t+1], chained as vLLM chains the layer: pair t is
        (h_t, ids[t+1]); pair t + j + 1 is (the layer's output at pair t + j before
        shared_head.norm, draft j). Returns the drafts and each step's top-1 minus top-2 margin."""
        h = self.hidden(ids[:t + 1])
        tokens = list(ids[1:t + 2])
        drafts, margins = [], []
        for _ in range(k):
            x, logits = self.mtp_layer(h, tokens)
            order = np.argsort(-logits[-1], kind="stable")
            drafts.append(int(order[0]))
            margins.append(float(logits[-1, order[0]] - logits[-1, order[1]]))
            h = np.concatenate([h, x[-1:]], axis=0)
            tokens.append(drafts[-1])
        return drafts, margins


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def check_main_model():
    """The shared main-model code against DeepSeek's reference outputs on the tiny-v3 fixture."""
    fixture = ROOT / "tests" / "data" / "models" / "tiny-v3"
    model = Model(fixture)
    golden = json.loads((fixture / "golden.json").read_text())
    worst = 0.0
    for case in golden["cases"][:4]:
        ids = case["prompt_ids"] + case["output_ids"][:-1]
        lp = log_softmax(model.logits(ids))
        for s, step in enumerate(case["steps"]):
            row = lp[len(case["prompt_ids"]) - 1 + s]
            assert int(np.argmax(row)) == step["token"], (case["prompt_ids"][:5], s)
            for token, logprob in step["top5"]:
                worst = max(worst, abs(row[token] - logprob))
    assert worst < 2e-3, worst
    print(f"main model against tiny-v3 golden.json: max |logprob error| {worst:.2e}", file=sys.stderr)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    model_dir = pathlib.Path(sys.argv[1])
    check_main_model()
    model = Model(model_dir)
    vocab = model.cfg["vocab_size"]
    rng = np.random.default_rng(16)
    cases = [[5, 17], [1, 2, 3, 4, 5, 6, 7, 8, 9], [int(t) for t in rng.integers(0, vocab, 40)],
             [int(t) for t in rng.integers(0, vocab, 70)], [vocab - 1, 0, vocab - 2, 3, vocab - 1, 0]]
    out = []
    for ids in cases:
        logits = model.mtp_logits(ids)
        lp = log_softmax(logits)
        positions = []
        for t in range(len(ids) - 1):
            chain, chain_margins = model.mtp_chain(ids, t, 3)
            order = np.argsort(-logits[t], kind="stable")
            positions.append({
                "t": t,
                "top5": [[int(i), float(lp[t, i])] for i in order[:5]],
                "target_logprob": float(lp[t, ids[t + 2]]) if t + 2 < len(ids) else None,
                "margin": float(logits[t, order[0]] - logits[t, order[1]]),
                "chain": chain,
                "chain_margins": chain_margins,
            })
        out.append({"ids": ids, "positions": positions})
    golden = {
        "reference": "DeepSeek-V3 technical report 2.2 (MTP) as vLLM deepseek_mtp.py / SGLang deepseek_nextn.py run it; "
                     "main model as DeepSeek-V3 inference/model.py; float64 numpy, tests/model/deepseek_mtp_reference.py",
        "checkpoint": "tools/make_checkpoint.py DIR --preset tiny-v3 --layers 2 --mtp",
        "cases": out,
    }
    (model_dir / "golden_mtp.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {model_dir / 'golden_mtp.json'}: {sum(len(c['positions']) for c in out)} positions", file=sys.stderr)


if __name__ == "__main__":
    main()
