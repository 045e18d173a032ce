"""DeepSeek-V4 and V4.1 under `deepinfer generate --expert-parallel N` (mpirun): each rank binds
(and, for FP4 experts, expands) only its slice of the routed experts, V4's hash-routed first
layers route by token id on the rank holding the row, and rank 0 prints exactly what one process
prints (ids and logprobs, bitwise) for one prompt and a batch spread over the ranks. Peak resident
memory per rank is reported. EPLB is refused for both with a clear error. The single-process outputs these are
compared with are checked against independent references in tests/model/."""
import re

import pytest

from conftest import ROOT
from test_expert_parallel import PROMPTS, generate, mpirun, peak_rss_kb, prompts_file

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


@pytest.mark.parametrize("model,arch", [("tiny-v4", "DeepseekV4ForCausalLM"), ("tiny-v41", "DeepseekV41ForCausalLM")])
def test_v4_refuses_eplb(deepinfer_bin, model, arch):
    out = generate(mpirun(2) + [deepinfer_bin], MODELS / model, "--prompt-ids", "1,2", "--expert-parallel", "2",
                   "--eplb-redundant-experts", "2")
    assert out.returncode != 0
    assert f"{arch} does not rebalance experts (EPLB) yet" in out.stderr


