"""DeepSeek-V2/V3 checkpoint configs for tools/make_checkpoint.py: presets (full Hugging Face
config.json dicts), overrides, tokenizer-derived fields, and validation.

A config here is exactly what goes into the checkpoint's config.json: the field names of Hugging
Face DeepSeek-V2/V3 configs (vocab_size, hidden_size, q_lora_rank, kv_lora_rank, n_routed_experts,
first_k_dense_replace, moe_layer_freq, topk_method, rope_scaling, ...).
"""
import copy
import json
import os

_ROPE_YARN = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
              "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}


def _base_config(**fields):
    config = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
        "moe_intermediate_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 4, "n_shared_experts": 1, "n_routed_experts": 16,
        "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True,
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "kv_lora_rank": 128, "q_lora_rank": 192,
        "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64, "hidden_act": "silu",
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "attention_bias": False, "bos_token_id": 0,
        "eos_token_id": 1, "torch_dtype": "bfloat16", "num_nextn_predict_layers": 0,
        "rope_scaling": dict(_ROPE_YARN),
    }
    for key, value in fields.items():
        assert key in config, key
        config[key] = value
    return config


_V2 = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2"}
_V2_ROUTING = {"scoring_func": "softmax", "topk_method": "greedy", "norm_topk_prob": False,
               "routed_scaling_factor": 1.0, "n_group": 1, "topk_group": 1}

# Full config.json dicts. tiny-v3 and tiny-v2 are the configs of the shared fixtures of those
# names; v2-lite has DeepSeek-V2-Lite's layer shapes and v3 DeepSeek-V3's, with few layers;
# v3-like has DeepSeek-V3's architecture (low-rank query, grouped sigmoid routing with a
# correction bias, V3 vocabulary) at DeepSeek-V2-Lite's widths, so it fits a workstation.
PRESETS = {
    "tiny-v3": _base_config(),
    "tiny-v2": _base_config(**_V2, **_V2_ROUTING, n_shared_experts=2, num_experts_per_tok=6,
                            q_lora_rank=None),
    "v2-lite": _base_config(
        **_V2, **_V2_ROUTING, vocab_size=102400, hidden_size=2048, intermediate_size=10944,
        moe_intermediate_size=1408, num_hidden_layers=4, num_attention_heads=16,
        num_key_value_heads=16, n_shared_experts=2, n_routed_experts=64, num_experts_per_tok=6,
        kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64,
        v_head_dim=128, max_position_embeddings=163840, bos_token_id=100000,
        eos_token_id=100001,
        rope_scaling=dict(_ROPE_YARN, mscale=0.707, mscale_all_dim=0.707)),
    "v3-like": _base_config(
        vocab_size=129280, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408,
        num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=16, n_shared_experts=1,
        n_routed_experts=64, num_experts_per_tok=8, n_group=8, topk_group=4,
        kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64,
        v_head_dim=128, max_position_embeddings=163840),
    "v3": _base_config(
        vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
        num_hidden_layers=4, num_attention_heads=128, num_key_value_heads=128,
        n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8, n_group=8,
        topk_group=4, first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=1536,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        max_position_embeddings=163840),
}

FP8_DEFAULTS = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                "weight_block_size": [128, 128]}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


class ConfigError(ValueError):
    """A config or option that cannot describe a checkpoint; the message says which field."""


# ----------------------------------------------------------------------------------------------
# Config

def parse_set(item):
    """'a.b=value' -> (['a', 'b'], value parsed as JSON, else the raw string)."""
    if "=" not in item:
        raise ConfigError(f"--set expects key=value, got {item!r}")
    key, raw = item.split("=", 1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip().split("."), value


def apply_set(config, path, value):
    node = config
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[path[-1]] = value


def tokenizer_info(tok_dir):
    """(vocab size = largest id + 1 over the model vocabulary and added tokens,
    bos id or None, eos id or None) from a Hugging Face tokenizer folder."""
    path = os.path.join(tok_dir, "tokenizer.json")
    if not os.path.isfile(path):
        raise ConfigError(f"--tokenizer {tok_dir}: no tokenizer.json there")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok.get("model", {}).get("vocab", {})
    ids = {}
    if isinstance(vocab, dict):
        ids.update(vocab)
        size = max(vocab.values(), default=-1) + 1
    else:  # Unigram: a list of [piece, score]
        ids.update({entry[0]: i for i, entry in enumerate(vocab)})
        size = len(vocab)
    for added in tok.get("added_tokens", []):
        ids[added["content"]] = added["id"]
        size = max(size, added["id"] + 1)
    if size <= 0:
        raise ConfigError(f"--tokenizer {tok_dir}: tokenizer.json has no vocabulary")

    def special_id(tok_config, key):
        token = tok_config.get(key)
        if isinstance(token, dict):
            token = token.get("content")
        return ids.get(token) if isinstance(token, str) else None

    tok_config = {}
    config_path = os.path.join(tok_dir, "tokenizer_config.json")
    if os.path.isfile(config_path):
        with open(config_path, encoding="utf-8") as f:
            tok_config = json.load(f)
    return size, special_id(tok_config, "bos_token"), special_id(tok_config, "eos_token")


def build_config(preset="tiny-v3", config_json=None, layers=None, sets=(), tokenizer=None,
                 mtp=False, dtype=None):
    """(config.json dict, dtype "bf16" or "fp8") from the options, in this order: the preset,
    the fields of the config_json file, layers (num_hidden_layers), each "key=value" of sets,
    then the tokenizer's vocabulary size and bos/eos ids (where not given explicitly by
    config_json or sets), the MTP layer count, and the quantization_config for the dtype
    (None: fp8 if the config already has an fp8 quantization_config, else bf16)."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; one of {', '.join(sorted(PRESETS))}")
    config = copy.deepcopy(PRESETS[preset])
    explicit = set()
    if config_json:
        with open(config_json, encoding="utf-8") as f:
            given = json.load(f)
        if not isinstance(given, dict):
            raise ConfigError(f"--config-json {config_json}: not a JSON object")
        config.update(given)
        explicit.update(given)
    if layers is not None:
        config["num_hidden_layers"] = layers
    for item in sets:
        path, value = parse_set(item)
        apply_set(config, path, value)
        explicit.add(path[0])
    if tokenizer:
        size, bos, eos = tokenizer_info(tokenizer)
        if "vocab_size" in explicit:
            if not isinstance(config["vocab_size"], int) or config["vocab_size"] < size:
                raise ConfigError(f"vocab_size {config['vocab_size']!r} is smaller than the "
                                  f"tokenizer's {size} tokens")
        else:
            config["vocab_size"] = size
        for key, token_id in (("bos_token_id", bos), ("eos_token_id", eos)):
            if token_id is not None and key not in explicit:
                config[key] = token_id
    n_mtp = config.get("num_nextn_predict_layers") or 0
    config["num_nextn_predict_layers"] = max(1, n_mtp) if mtp else 0
    quant = config.get("quantization_config")
    quant = quant if isinstance(quant, dict) else {}
    if dtype is None:
        dtype = "fp8" if quant.get("quant_method") == "fp8" else "bf16"
    if dtype == "fp8":
        config["quantization_config"] = dict(FP8_DEFAULTS, **quant)
    elif dtype == "bf16":
        config.pop("quantization_config", None)
    else:
        raise ConfigError(f"dtype {dtype!r}: bf16 or fp8")
    config["torch_dtype"] = "bfloat16"
    validate(config)
    return config, dtype


def _positive_int(config, key, allow_zero=False):
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if allow_zero else 1):
        raise ConfigError(f"{key} must be a {'non-negative' if allow_zero else 'positive'} "
                          f"integer, got {value!r}")
    return value


def is_moe_layer(config, index):
    """Hugging Face DeepSeek-V2/V3 rule for which layers hold a mixture of experts."""
    return (bool(config.get("n_routed_experts")) and index >= config["first_k_dense_replace"]
            and index % config["moe_layer_freq"] == 0)


def validate(config):
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "moe_layer_freq"):
        _positive_int(config, key)
    for key in ("qk_nope_head_dim", "first_k_dense_replace", "num_nextn_predict_layers"):
        _positive_int(config, key, allow_zero=True)
    if config.get("q_lora_rank") is not None:
        _positive_int(config, "q_lora_rank")
    if config["qk_rope_head_dim"] % 2:
        raise ConfigError("qk_rope_head_dim must be even (rotary pairs)")
    n_layers = config["num_hidden_layers"] + config["num_nextn_predict_layers"]
    moe = [is_moe_layer(config, i) for i in range(n_layers)]
    if not all(moe):
        _positive_int(config, "intermediate_size")
    if any(moe):
        for key in ("n_routed_experts", "moe_intermediate_size", "num_experts_per_tok",
                    "n_group", "topk_group"):
            _positive_int(config, key)
        if config.get("n_shared_experts") is not None:
            _positive_int(config, "n_shared_experts", allow_zero=True)
        if config["num_experts_per_tok"] > config["n_routed_experts"]:
            raise ConfigError("num_experts_per_tok exceeds n_routed_experts")
        if config["n_routed_experts"] % config["n_group"]:
            raise ConfigError("n_routed_experts must be a multiple of n_group")
        if config["topk_group"] > config["n_group"]:
            raise ConfigError("topk_group exceeds n_group")
        if config.get("scoring_func") not in ("softmax", "sigmoid"):
            raise ConfigError(f"scoring_func {config.get('scoring_func')!r}: softmax or sigmoid")
        if config.get("topk_method") not in ("greedy", "group_limited_greedy", "noaux_tc"):
            raise ConfigError(f"topk_method {config.get('topk_method')!r}: greedy, "
                              "group_limited_greedy or noaux_tc")
    for key in ("bos_token_id", "eos_token_id"):
        ids = config.get(key)
        for token_id in ids if isinstance(ids, list) else [ids]:
            in_vocab = isinstance(token_id, int) and 0 <= token_id < config["vocab_size"]
            if token_id is not None and not in_vocab:
                raise ConfigError(f"{key} {token_id!r} is outside the vocabulary "
                                  f"({config['vocab_size']})")
    quant = config.get("quantization_config")
    if quant is not None:
        block = quant.get("weight_block_size")
        if not (isinstance(block, list) and len(block) == 2
                and all(isinstance(b, int) and b > 0 for b in block)):
            raise ConfigError("quantization_config.weight_block_size must be [rows, cols], "
                              f"got {block!r}")
