"""The read-stream kernel behind the bandwidth ceiling reads every word once (interpreter on a CPU)."""

import pytest
import torch

from lab import LabError
from lab.measure import bandwidth

ON_GPU = torch.cuda.is_available()


@pytest.mark.parametrize("words,programs", [(4096, 1), (10_000, 3), (3 * 4096 + 17, 2)])
def test_read_kernel_sums_every_word_once(words, programs):
    device = "cuda" if ON_GPU else "cpu"
    x = torch.randint(-1000, 1000, (words,), dtype=torch.int32, device=device)
    assert bandwidth.read_sum(x, programs).item() == x.sum(dtype=torch.int32).item()


def test_without_a_gpu_the_command_says_where_the_cached_run_is(tmp_path):
    if ON_GPU:
        pytest.skip("a GPU is here")
    from lab.__main__ import build_parser

    args = build_parser().parse_args(["bandwidth", "--out", str(tmp_path / "bw")])
    with pytest.raises(LabError, match="data/h200/bandwidth"):
        bandwidth.main(args)
    assert not (tmp_path / "bw").exists()
