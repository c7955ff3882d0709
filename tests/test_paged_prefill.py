"""The paged varlen prefill kernel against the plain-torch reference: ragged chunks over cached prefixes, prefill and
decode rows in one batch, GQA, page sizes smaller and larger than a key tile, shuffled pages (Triton's interpreter on
CPU in fp32/fp16; bf16 at real sizes on a GPU, marked gpu), its one-line refusals, and planted bugs the check catches."""


import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_device import DEVICE, ON_GPU, TOLERANCE  # noqa: E402

from lab import LabError  # noqa: E402
from lab.measure.attention import paged_prefill as pp  # noqa: E402
from lab.measure.attention.reference import attention_torch, paged_varlen_attention_torch  # noqa: E402

needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")


def _error(inputs, out=None, compute_dtype=torch.float64):
    """Largest absolute error of the kernel's output (or ``out``) against the reference on the same inputs."""
    out = pp.paged_prefill(*inputs) if out is None else out
    q = inputs[0]
    assert out.shape == q.shape and out.dtype == q.dtype and torch.isfinite(out).all()
    # the reference on upcast inputs, so that its own output is not rounded back to q's dtype
    exact = paged_varlen_attention_torch(*(t.to(compute_dtype) if t.is_floating_point() else t for t in inputs),
                                         compute_dtype=compute_dtype)
    return (out.double() - exact.double()).abs().max().item()


def _repaged(inputs, page_size: int, seed: int = 0):
    """The same batch in pages of any size (paginate takes powers of two only), scattered in a random order."""
    q, k_cache, v_cache, cu, seq_lens, table = inputs
    gen = torch.Generator().manual_seed(seed)
    old = k_cache.shape[1]
    per_seq = [-(-n // page_size) for n in seq_lens.tolist()]
    order = torch.randperm(sum(per_seq), generator=gen)
    shape = (sum(per_seq), page_size, *k_cache.shape[2:])
    caches = [torch.zeros(shape, dtype=k_cache.dtype, device=k_cache.device) for _ in range(2)]
    new_table = torch.zeros(len(per_seq), max(per_seq), dtype=torch.int32, device=k_cache.device)
    used = 0
    for b, (n, count) in enumerate(zip(seq_lens.tolist(), per_seq, strict=True)):
        ids = order[used:used + count]
        used += count
        new_table[b, :count] = ids.to(torch.int32)
        for new, src in zip(caches, (k_cache, v_cache), strict=True):
            rows = src[table[b, : -(-n // old)].long()].flatten(0, 1)[:n]
            padded = torch.zeros(count * page_size, *rows.shape[1:], dtype=rows.dtype, device=rows.device)
            padded[:n] = rows
            new[ids.to(rows.device)] = padded.view(count, page_size, *rows.shape[1:])
    return q, *caches, cu, seq_lens, new_table


# --- the reference ---------------------------------------------------------------------------------

def test_reference_is_causal_attention_per_sequence():
    # one sequence without a prefix: the plain causal reference on contiguous K/V
    q, k_cache, v_cache, cu, lens, table = pp.paged_batch([21], [0], 4, 2, 64, 8, torch.float64, seed=1)
    k, v = (c[table[0, :3].long()].flatten(0, 1)[:21].transpose(0, 1)[None] for c in (k_cache, v_cache))
    expected = attention_torch(q.transpose(0, 1)[None], k, v, causal=True, compute_dtype=torch.float64)
    got = paged_varlen_attention_torch(q, k_cache, v_cache, cu, lens, table, compute_dtype=torch.float64)
    assert torch.equal(got, expected[0].transpose(0, 1))


def test_reference_decode_row_sees_the_whole_prefix_and_chunk_rows_shift_by_it():
    q, k_cache, v_cache, cu, lens, table = pp.paged_batch([1, 3], [40, 5], 2, 1, 64, 16, torch.float64, seed=2)
    got = paged_varlen_attention_torch(q, k_cache, v_cache, cu, lens, table, compute_dtype=torch.float64)
    k, v = (c[table[0, :3].long()].flatten(0, 1)[:41].transpose(0, 1)[None] for c in (k_cache, v_cache))
    assert torch.allclose(got[:1], attention_torch(q[:1].transpose(0, 1)[None], k, v, compute_dtype=torch.float64)[0]
                          .transpose(0, 1), atol=1e-12)
    # the first query of a chunk after a 5-token prefix sees exactly keys 0..5
    k, v = (c[table[1, :1].long()].flatten(0, 1)[:6].transpose(0, 1)[None] for c in (k_cache, v_cache))
    first = attention_torch(q[1:2].transpose(0, 1)[None], k, v, compute_dtype=torch.float64)[0].transpose(0, 1)
    assert torch.allclose(got[1:2], first, atol=1e-12)


# --- the kernel in the interpreter ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype,head_dim,page_size", [
    (torch.float32, 64, 16), (torch.float16, 64, 16),     # pages as large as a 16-key tile
    (torch.float32, 128, 64), (torch.float16, 128, 4),    # several tiles per page; several pages per tile
], ids=lambda x: str(x).replace("torch.", ""))
def test_check_cases_match_reference(dtype, head_dim, page_size):
    # ragged (1, 7, 130 tokens), prefix + chunk (prefixes 0, 5, 33, 200), prefill + decode rows, GQA 4:2 and 7:1
    errors = pp.check(head_dim, page_size, dtype, seed=head_dim + page_size)
    assert set(errors) == set(pp.CHECK_CASES)
    assert max(errors.values()) <= TOLERANCE[dtype], errors


@pytest.mark.parametrize("config", [{"BLOCK_M": 32, "BLOCK_N": 32}, {"BLOCK_M": 16, "BLOCK_N": 64},
                                    {"BLOCK_M": 32, "BLOCK_N": 32, "maxnreg": 128}],
                         ids=["32x32", "16x64", "32x32-register-cap"])
def test_other_tiles_with_pages_smaller_than_a_tile(config):
    inputs = pp.paged_batch([1, 45, 18], [70, 3, 0], 4, 2, 64, 16, torch.float32, DEVICE, seed=3)
    out = pp.paged_prefill(*inputs, config=config)
    assert _error(inputs, out) <= TOLERANCE[torch.float32]


def test_page_size_a_multiple_of_the_tile_but_not_a_power_of_two():
    # 48-token pages: three 16-key tiles each in the interpreter; a GPU's 64-key tiles need pages of 64 or 128
    page = 48 if not ON_GPU else 128
    inputs = _repaged(pp.paged_batch([9, 1, 30], [40, 60, 7], 4, 2, 64, 16, torch.float32, DEVICE, seed=4), page)
    assert _error(inputs) <= TOLERANCE[torch.float32]


def test_shuffled_pages_give_the_same_output_as_pages_in_order():
    lens, prefixes = [5, 33, 1], [50, 0, 77]
    in_order = pp.paged_batch(lens, prefixes, 4, 2, 64, 8, torch.float32, DEVICE, seed=5, shuffle=False)
    shuffled = pp.paged_batch(lens, prefixes, 4, 2, 64, 8, torch.float32, DEVICE, seed=5, shuffle=True)
    assert not torch.equal(in_order[-1], shuffled[-1])
    assert torch.equal(pp.paged_prefill(*in_order), pp.paged_prefill(*shuffled))


def test_empty_chunk_known_longest_chunk_and_output_buffer():
    # a sequence with no new tokens this step writes nothing; max_seqlen_q skips the read-back; out is filled in place
    inputs = pp.paged_batch([0, 17, 1], [12, 9, 30], 2, 2, 64, 16, torch.float16, DEVICE, seed=6)
    out = torch.full_like(inputs[0], float("nan"))
    assert pp.paged_prefill(*inputs, max_seqlen_q=17, out=out) is out
    assert _error(inputs, out) <= TOLERANCE[torch.float16]


# --- refusals, one line each ---------------------------------------------------------------------------

def _one_line_refusal(match, *args, **kwargs):
    with pytest.raises(LabError, match=match) as raised:
        pp.paged_prefill(*args, **kwargs)
    assert "\n" not in str(raised.value)


def test_refuses_a_page_size_that_does_not_fit_the_tile():
    q, _, _, cu, lens, table = pp.paged_batch([4], [0], 2, 1, 64, 16, device=DEVICE)
    cache = torch.zeros(2, 24, 1, 64, device=DEVICE)
    tile = 64 if ON_GPU else 16
    _one_line_refusal(f"page size 24 does not fit {tile}-key tiles: use a page size that divides {tile} or is a multiple",
                      q, cache, cache, cu, lens, table)


@pytest.mark.parametrize("head_dim", [32, 96, 256])
def test_refuses_head_dims_other_than_64_and_128(head_dim):
    q, k_cache, v_cache, cu, lens, table = pp.paged_batch([4], [0], 2, 1, head_dim, 16)
    _one_line_refusal(f"head dim {head_dim} .*takes head dims 64 and 128; use vLLM's FLASH_ATTN", q, k_cache, v_cache,
                      cu, lens, table)


def test_refuses_query_heads_not_a_multiple_of_kv_heads():
    _one_line_refusal(r"query heads \(3\) must be a multiple of KV heads \(2\)",
                      *pp.paged_batch([4], [0], 3, 2, 64, 16))


def test_refuses_seq_lens_shorter_than_the_chunk():
    q, k_cache, v_cache, cu, lens, table = pp.paged_batch([1, 10], [3, 2], 2, 1, 64, 16, device=DEVICE)
    _one_line_refusal("sequence 1: 10 new queries over seq_lens 9 keys; seq_lens counts the cached prefix",
                      q, k_cache, v_cache, cu, lens - 3, table)


# --- the check fails on planted bugs --------------------------------------------------------------------

def test_check_fails_when_a_page_is_read_from_the_wrong_place():
    def swapped_pages(q, k_cache, v_cache, cu, lens, table):
        wrong = table.clone()
        wrong[:, [0, 1]] = wrong[:, [1, 0]]  # the first two pages of every sequence swapped
        return pp.paged_prefill(q, k_cache, v_cache, cu, lens, wrong)

    cases = {"prefix + chunk": pp.CHECK_CASES["prefix + chunk"]}
    honest, planted = pp.check(forward=pp.paged_prefill, cases=cases), pp.check(forward=swapped_pages, cases=cases)
    assert honest["prefix + chunk"] <= TOLERANCE[torch.float32]
    assert planted["prefix + chunk"] > 100 * TOLERANCE[torch.float32], planted


def test_check_fails_when_the_causal_diagonal_is_one_key_off():
    # the kernel told every sequence holds one key more: each query sees the key after it (the diagonal one right)
    def one_key_late(q, k_cache, v_cache, cu, lens, table):
        return pp.paged_prefill(q, k_cache, v_cache, cu, lens + 1, table)

    cases = {"prefix + chunk": pp.CHECK_CASES["prefix + chunk"]}
    planted = pp.check(forward=one_key_late, cases=cases)
    assert planted["prefix + chunk"] > 100 * TOLERANCE[torch.float32], planted


# --- GPU, real sizes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("head_dim,page_size,config", [(128, 16, None), (128, 64, None), (64, 128, None),
                                                       (128, 16, {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8}),
                                                       (128, 16, {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8,
                                                                  "num_stages": 2, "maxnreg": 128})],
                         ids=["d128-page16", "d128-page64", "d64-page128", "d128-page16-128x64",
                              "d128-page16-128x64-r128"])
@pytest.mark.gpu
@needs_gpu
def test_paged_prefill_bf16_at_real_sizes(head_dim, page_size, config):
    # a server step: long chunks over long prefixes, whole prompts, decode rows; 32 query heads over 8 KV heads
    q_lens, prefixes = [1, 1000, 37, 1, 513, 2048, 1], [4000, 0, 2000, 300, 1024, 0, 16383]
    inputs = pp.paged_batch(q_lens, prefixes, 32, 8, head_dim, page_size, torch.bfloat16, DEVICE, seed=page_size,
                            spare_pages=100)
    out = pp.paged_prefill(*inputs, config=config)
    assert _error(inputs, out, compute_dtype=torch.float32) <= TOLERANCE[torch.bfloat16]
