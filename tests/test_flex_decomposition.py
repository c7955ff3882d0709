"""lab.measure.flex_decomposition: the vLLM-like paged layout, its mask and block mask, on the CPU."""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")

from lab import LabError  # noqa: E402
from lab.measure import flex_decomposition as fd  # noqa: E402
from lab.measure.attention.reference import attention_torch  # noqa: E402


def expected_mask(layout) -> torch.Tensor:
    """Dense [tokens, pool positions] mask written the slow way: for each request, its own tokens up to
    the query's logical position, located through the block table."""
    tokens, pool = len(layout.doc_ids), layout.num_pages * layout.page
    mask = torch.zeros(tokens, pool, dtype=torch.bool)
    for t in range(tokens):
        r = int(layout.doc_ids[t])
        logical_q = t - int(layout.q_start[r]) + int(layout.q_offset[r])
        for j in range(logical_q + 1):
            page = int(layout.block_table[r, j // layout.page])
            mask[t, page * layout.page + j % layout.page] = True
    return mask


def evaluate(layout) -> torch.Tensor:
    tokens, pool = len(layout.doc_ids), layout.num_pages * layout.page
    q_idx = torch.arange(tokens)[:, None]
    kv_idx = torch.arange(pool)[None, :]
    return fd.paged_mask_mod(layout)(0, 0, q_idx, kv_idx)


@pytest.mark.parametrize("seq_lens,q_lens", [([37, 50, 16], [1, 1, 1]),    # decode: three requests, one token each
                                             ([40], [40]),                    # prefill of one request
                                             ([30, 21], [30, 5])])           # prefill + chunk of a second
def test_the_paged_mask_is_each_requests_own_causal_mask(seq_lens, q_lens):
    layout = fd.paged_layout(seq_lens, q_lens, page=8, q_block=4, seed=3, spare_pages=2)
    assert torch.equal(evaluate(layout), expected_mask(layout))


def test_pages_are_shuffled_distinct_and_page_zero_is_never_used():
    layout = fd.paged_layout([64, 64], [1, 1], page=8, seed=1)
    used = layout.block_table[layout.block_table > 0]
    assert len(used) == 16 and len(set(used.tolist())) == 16 and 0 not in used.tolist()
    assert used.tolist() != sorted(used.tolist())
    for r in range(2):  # the inverse table undoes the table
        assert layout.physical_to_logical[r, layout.block_table[r]].tolist() == list(range(8))


def test_every_page_a_query_block_needs_is_in_its_kv_indices():
    layout = fd.paged_layout([37, 50, 16, 9, 23], [1, 1, 1, 1, 1], page=8, q_block=4, seed=5)
    mask = evaluate(layout)
    for g in range(layout.kv_indices.shape[2]):
        rows = mask[g * layout.q_block:(g + 1) * layout.q_block]
        needed = {int(p) // layout.page for p in rows.any(0).nonzero().flatten()}
        listed = set(layout.kv_indices[0, 0, g, :int(layout.kv_num_blocks[0, 0, g])].tolist())
        assert needed <= listed
    # vLLM's recipe lists every page of every request in the block: the union, not each query's own
    assert int(layout.kv_num_blocks[0, 0, 0]) == sum(math.ceil(s / 8) for s in (37, 50, 16, 9))


def test_bad_lengths_are_a_clear_error():
    with pytest.raises(LabError, match="q_len"):
        fd.paged_layout([8], [9])
    with pytest.raises(LabError, match="equal length"):
        fd.paged_layout([8, 8], [1])


def test_paged_views_hold_the_same_keys_and_values():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, h, n, 16, generator=gen) for h, n in ((4, 1), (2, 21), (2, 21)))
    layout = fd.paged_layout([21, 21], [1, 1], page=8, seed=2)
    query, key, value, _ = fd.to_paged(q, k, v, layout)
    assert query.shape == (1, 4, 2, 16) and key.shape == (1, 2, layout.num_pages * 8, 16)
    for r in range(2):
        positions = torch.tensor([int(layout.block_table[r, j // 8]) * 8 + j % 8 for j in range(21)])
        assert torch.equal(key[0, :, positions], k[r]) and torch.equal(value[0, :, positions], v[r])
    assert torch.equal(fd.from_paged(query, 2), q)


def test_flex_attention_over_the_paged_pool_matches_attention_on_contiguous_kv():
    from torch.nn.attention.flex_attention import flex_attention

    gen = torch.Generator().manual_seed(4)
    batch, n = 3, 40
    q, k, v = (torch.randn(batch, h, rows, 16, generator=gen) for h, rows in ((4, 1), (2, n), (2, n)))
    layout = fd.paged_layout([n] * batch, [1] * batch, page=8, q_block=4, seed=6)
    query, key, value, _ = fd.to_paged(q, k, v, layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager flex on the CPU warns that it is unfused
        out = flex_attention(query, key, value, block_mask=fd.paged_block_mask(layout), enable_gqa=True)
    torch.testing.assert_close(fd.from_paged(out, batch), attention_torch(q, k, v, False), atol=1e-5, rtol=1e-5)


def test_padding_the_query_groups_to_a_power_of_two_keeps_the_outputs():
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, h, rows, 16, generator=gen) for h, rows in ((28, 1), (4, 30), (4, 30)))
    padded = fd.pad_group_heads(q, 4, 8)
    assert padded.shape == (2, 32, 1, 16)
    out = attention_torch(padded, k, v, False)
    torch.testing.assert_close(fd.unpad_group_heads(out, 4, 7), attention_torch(q, k, v, False))


def test_help_runs_without_a_gpu(capsys):
    assert fd.cli(["--help"]) == 0 and "FORCE_USE_FLEX_ATTENTION" in capsys.readouterr().out


def test_the_installed_torch_is_inspected_for_the_decode_template_rules():
    markers = fd.source_markers()
    assert markers.get("torch_use_flex_decoding_honours_force") is True  # the torch here has the rule too
    assert "vllm_flex_file" in markers


class FakeEvent:
    """torch.cuda.Event on the CPU: each start/end pair is 'timed' by a counter."""
    clock = 0.0

    def __init__(self, enable_timing=True):
        self.t = 0.0

    def record(self):
        FakeEvent.clock += 1.0
        self.t = FakeEvent.clock

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return other.t - self.t


def test_measure_phase_checks_times_and_reports_each_variant(monkeypatch):
    from lab.measure.attention.reference import attention_torch as exact

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None, raising=False)
    monkeypatch.setattr(fd, "kernel_names", lambda fn: "k0 grid=[1, 1, 1]")

    def fake_variant(name, q, k, v, causal):
        if name == "flex-default":   # right
            return (lambda: exact(q, k, v, causal)), (lambda out: out)
        if name == "flex-forced":    # wrong answer: reported, not timed
            return (lambda: exact(q, k, v, causal) + 1), (lambda out: out)
        if name == "flex-paged":     # cannot run
            raise RuntimeError("no such kernel\nsecond line")
        return (lambda: None), None  # copy: nothing to check
    monkeypatch.setattr(fd, "variant_fn", fake_variant)
    rows = fd.measure_phase("decode", 2, 64, ["flex-default", "flex-forced", "flex-paged", "copy"], rep_ms=3,
                            rounds=3, q_heads=4, kv_heads=2, head_dim=16, progress=lambda text: None, device="cpu")
    by = {r["variant"]: r for r in rows}
    assert set(by["flex-default"]) == set(fd.COLUMNS)
    assert by["flex-default"]["ms"] == 1.0 and by["flex-default"]["ms_rounds"] == "1 1 1"
    assert by["flex-default"]["kv_bytes"] == 2 * 2 * 2 * 64 * 16 * 2   # K and V of 2 requests, bf16
    assert by["flex-default"]["gb_per_s"] == pytest.approx(by["flex-default"]["kv_bytes"] / 1e-3 / 1e9)
    assert "enable_gqa=True" in by["flex-default"]["note"] and "k0 grid" in by["flex-default"]["note"]
    assert by["flex-forced"]["note"].startswith("WRONG") and math.isnan(by["flex-forced"]["ms"])
    assert by["flex-paged"]["note"] == "error: RuntimeError: no such kernel"
    assert by["copy"]["gb_per_s"] == pytest.approx(2 * by["copy"]["kv_bytes"] / 1e-3 / 1e9)  # read + write
