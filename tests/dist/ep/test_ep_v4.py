"""DeepSeek-V4 and V4.1 under `deepinfer generate --expert-parallel N` (mpirun): each rank binds
(FP4 experts packed, as mapped) only its slice of the routed experts, V4's hash-routed first
layers route by token id on the rank holding the row, and rank 0 prints exactly what one process
prints (ids and logprobs, bitwise) for one prompt and a batch spread over the ranks. Peak resident
memory per rank is reported. EPLB is refused for both with a clear error. The single-process outputs these are
compared with are checked against independent references in tests/model/."""
import pathlib
import subprocess
import sys

import pytest

from test_expert_parallel import PROMPTS, generate, mpirun, peak_rss_kb, prompts_file, relaid_mib

ROOT = pathlib.Path(__file__).resolve().parents[3]  # the repository

MODELS = ROOT / "tests" / "data" / "models"


@pytest.mark.parametrize("model", ["tiny-v4", "tiny-v4-fp8", "tiny-v41", "tiny-v41-qat"])
def test_v4_generate_is_bitwise_the_single_process(deepinfer_bin, tmp_path, model):
    path = MODELS / model
    batch = prompts_file(tmp_path, PROMPTS)
    for args in (["--prompt-ids", "5,17,300,42,9", "--max-tokens", "10"], ["--prompts-file", batch, "--max-tokens", "8"]):
        single = generate([deepinfer_bin], path, *args)
        assert single.returncode == 0, single.stderr
        assert single.stdout.count("\n") == (1 if "--prompt-ids" in args else len(PROMPTS))
        for n in (2, 4):
            ep = generate(mpirun(n) + [deepinfer_bin], path, *args, "--expert-parallel", str(n))
            assert ep.returncode == 0, ep.stderr
            assert ep.stdout == single.stdout, f"{n} ranks, {args}"
            peaks = peak_rss_kb(ep.stderr)
            assert len(peaks) == n
            print(f"{model} {n} ranks {args[0]}: peak RSS per rank (kB) {peaks}")


@pytest.mark.parametrize("model", ["tiny-v3-fp8", "tiny-v4-fp8", "tiny-v41"])
def test_bf16_activations_across_ranks_relay_and_are_bitwise_the_single_process(deepinfer_bin, tmp_path, model):
    """With --activation-dtype bf16 each rank's experts take bf16 inputs as one process's do. Where
    the CPU level relays weights (fp8 tile-major on AVX-512 BF16 and AMX), every rank relays what
    it holds: the shared weights, and its slice of the routed experts (V4's FP4 experts only where
    the level relays FP4). Relaid or not (--no-weight-relay), the outputs are bitwise one
    process's."""
    path = MODELS / model
    args = ["--prompts-file", prompts_file(tmp_path, PROMPTS), "--max-tokens", "8", "--activation-dtype", "bf16"]
    single = generate([deepinfer_bin], path, *args)
    assert single.returncode == 0, single.stderr
    assert single.stdout.count("\n") == len(PROMPTS) and "bf16 activations" in single.stderr
    ep = generate(mpirun(2) + [deepinfer_bin], path, *args, "--expert-parallel", "2")
    assert ep.returncode == 0, ep.stderr
    assert ep.stdout == single.stdout
    [alone], ranks = relaid_mib(single.stderr), relaid_mib(ep.stderr)
    assert len(ranks) == 2
    if alone == 0:
        assert ranks == [0, 0]
    elif model == "tiny-v3-fp8":  # its fp8 experts split over the ranks
        assert all(0 < r < alone for r in ranks) and sum(ranks) > alone, (alone, ranks)
    else:  # the same as alone where the level keeps FP4 experts as stored
        assert all(0 < r <= alone for r in ranks) and sum(ranks) > alone, (alone, ranks)
    stored = generate(mpirun(2) + [deepinfer_bin], path, *args, "--expert-parallel", "2", "--no-weight-relay")
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout == single.stdout and relaid_mib(stored.stderr) == [0, 0]


@pytest.mark.parametrize("model", ["tiny-v4", "tiny-v41"])
@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_v4_chunked_prefill_and_prefix_cache_across_ranks(deepinfer_bin, tmp_path, model, kv):
    """Prompts sharing a prefix, 8 tokens of prefill per step, on 3 ranks: each rank's scheduler,
    windowed and compressed caches work as alone while the MoE layers run across ranks."""
    prefix = list(range(40, 80)) + list(range(40, 60))
    prompts = [prefix + [i, i + 1] for i in range(2, 9)]
    args = ["--prompts-file", prompts_file(tmp_path, prompts), "--max-tokens", "12", "--max-num-batched-tokens", "8",
            "--block-size", "16", "--kv-cache-dtype", kv]
    single = generate([deepinfer_bin], MODELS / model, *args)
    assert single.returncode == 0, single.stderr
    ep = generate(mpirun(3) + [deepinfer_bin], MODELS / model, *args, "--expert-parallel", "3")
    assert ep.returncode == 0, ep.stderr
    assert ep.stdout == single.stdout


@pytest.fixture(scope="module")
def v4_fp4_experts(tmp_path_factory):
    """tiny-v4's layers with 64 FP4 routed experts of 2048 (--dtype fp8): packed they are
    4 x 64 x 3 x 128 x 2048 x 0.53 B = 107 MB in the main layers (403 MB expanded to bf16; the MTP
    block's 27 MB are bound on every rank)."""
    out = tmp_path_factory.mktemp("v4-fp4-experts")
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_v4_checkpoint.py"), str(out), "--preset", "tiny-v4",
                    "--dtype", "fp8", "--set", "n_routed_experts=64", "--set", "moe_intermediate_size=2048",
                    "--seed", "3"], check=True, capture_output=True, timeout=600)
    return out


def test_v4_ranks_read_only_their_fp4_experts(deepinfer_bin, tmp_path, v4_fp4_experts):
    args = ["--prompts-file", prompts_file(tmp_path, PROMPTS[:3]), "--max-tokens", "4"]
    single = generate([deepinfer_bin], v4_fp4_experts, *args, timeout=600)
    assert single.returncode == 0, single.stderr
    peaks = {}
    for n in (2, 4):
        ep = generate(mpirun(n) + [deepinfer_bin], v4_fp4_experts, *args, "--expert-parallel", str(n), timeout=600)
        assert ep.returncode == 0, ep.stderr
        assert ep.stdout == single.stdout, f"{n} ranks"
        peaks[n] = peak_rss_kb(ep.stderr)
        assert len(peaks[n]) == n
    print(f"peak RSS per rank (kB): {peaks}")
    # The experts stay packed: a rank of 2 holds 27 MB of them (expanded to bf16 they were 101 MB,
    # and a rank's peak ~400 MB). A rank of 4 reads half of those bytes (measured ~18 MB less).
    assert max(peaks[2]) < 150_000, peaks
    assert max(peaks[4]) < min(peaks[2]) - 8_000, peaks


@pytest.mark.parametrize("model,arch", [("tiny-v4", "DeepseekV4ForCausalLM"), ("tiny-v41", "DeepseekV41ForCausalLM")])
def test_v4_refuses_eplb(deepinfer_bin, model, arch):
    out = generate(mpirun(2) + [deepinfer_bin], MODELS / model, "--prompt-ids", "1,2", "--expert-parallel", "2",
                   "--eplb-redundant-experts", "2")
    assert out.returncode != 0
    assert f"{arch} does not rebalance experts (EPLB) yet" in out.stderr


