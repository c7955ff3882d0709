"""The OURS backend's vLLM side (lab.measure.vllm.backend), where vLLM imports: its start-up refusals name what is
unsupported and what to use instead, the KV cache's layout is the one the kernels read, and one step through the
impl (prefill chunk with a prefix beside decodes, then a decode step planned for the server's longest sequence)
matches the reference; on a GPU the step's new keys and values are first written by vLLM's own cache op.
Skipped where vLLM is not installed (the CPU CI); the GPU study runs it (scripts/gpu/ours-in-vllm.sh)."""

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from kernel_device import DEVICE, ON_GPU, TOLERANCE  # noqa: E402

from lab.measure.attention.paged_prefill import paged_batch  # noqa: E402
from lab.measure.attention.reference import paged_varlen_attention_torch  # noqa: E402
from lab.measure.vllm import backend  # noqa: E402

DTYPE = torch.bfloat16 if ON_GPU else torch.float32


def _refusals(**config):
    from vllm.platforms.interface import DeviceCapability

    base = dict(head_size=128, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=16, use_mla=False,
                has_sink=False, use_sparse=False, use_mm_prefix=False, use_per_head_quant_scales=False,
                device_capability=DeviceCapability(9, 0), attn_type="decoder")
    return backend.LabAttentionBackend.validate_configuration(**{**base, **config})


def test_what_the_kernels_run_is_accepted():
    assert _refusals() == [] and _refusals(head_size=64, dtype=torch.float16, block_size=128) == []


@pytest.mark.parametrize("config, words", [
    ({"head_size": 96}, "head size 96"), ({"kv_cache_dtype": "fp8"}, "KV-cache dtype fp8"),
    ({"block_size": 48}, "block size 48"), ({"dtype": torch.float32}, "dtype torch.float32"),
    ({"has_sliding_window": True}, "sliding window"), ({"attn_type": "encoder_only"}, "encoder_only"),
])
def test_what_they_lack_is_refused_at_start_naming_the_way_out(config, words):
    reasons = _refusals(**config)
    assert len(reasons) == 1 and words in reasons[0] and "use --attention-backend FLASH_ATTN" in reasons[0]


def test_an_impl_with_a_feature_the_kernels_lack_refuses_to_build():
    with pytest.raises(ValueError, match="sliding window: use --attention-backend FLASH_ATTN"):
        backend.LabAttentionImpl(4, 64, 0.125, 2, sliding_window=4096)


def _vllm_cache(k_cache, v_cache):
    """The pages in vLLM's FlashAttention layout: logical (blocks, kv_heads, block_size, 2 x head_dim), stored
    blocks, tokens, heads, dims, as the backend's stride order says."""
    blocks, block_size, kv_heads, d = k_cache.shape
    shape = backend.LabAttentionBackend.get_kv_cache_shape(blocks, block_size, kv_heads, d)
    order = backend.LabAttentionBackend.get_kv_cache_stride_order()
    stored = torch.empty([shape[i] for i in order], dtype=k_cache.dtype, device=k_cache.device)
    stored[..., :d], stored[..., d:] = k_cache, v_cache
    return stored.permute(*[order.index(i) for i in range(4)])


@pytest.mark.parametrize("q_lens, prefixes, num_decodes", [([1, 37, 1], [99, 0, 250], 0),
                                                           ([1, 1, 37, 5], [99, 250, 0, 12], 2),
                                                           ([1, 1, 1, 1], [40, 7, 129, 0], 4)])
def test_one_step_through_the_impl_matches_the_reference(q_lens, prefixes, num_decodes):
    q, k_cache, v_cache, cu, seq_lens, table = paged_batch(q_lens, prefixes, 4, 2, 64, 16, DTYPE, DEVICE, seed=5)
    exact = paged_varlen_attention_torch(*(t.double() if t.is_floating_point() else t
                                           for t in (q, k_cache, v_cache, cu, seq_lens, table)),
                                         compute_dtype=torch.float64)
    kv_cache = _vllm_cache(k_cache, v_cache)
    impl = backend.LabAttentionImpl(4, 64, 0.125, 2)
    metadata = backend.LabAttentionMetadata(
        num_actual_tokens=q.shape[0], max_query_len=max(q_lens),
        split_keys=4096 if max(q_lens) == 1 else int(seq_lens.max()), query_start_loc=cu, seq_lens=seq_lens,
        block_table=table, max_seq_len=int(seq_lens.max()), num_decodes=num_decodes)
    output = torch.full_like(q, float("nan"))
    impl.forward(None, q, None, None, kv_cache, metadata, output)
    assert (output.double() - exact).abs().max().item() < TOLERANCE[DTYPE]


@pytest.mark.skipif(not ON_GPU, reason="vLLM's cache op runs on a GPU")
def test_the_cache_write_is_vllms_and_lands_where_the_kernels_read():
    q, k_cache, v_cache, cu, seq_lens, table = paged_batch([5], [11], 4, 2, 64, 16, DTYPE, DEVICE, seed=6)
    kv_cache = _vllm_cache(k_cache, v_cache)
    layer = torch.nn.Module()
    layer._k_scale = layer._v_scale = torch.ones((), device=DEVICE)
    new_k, new_v = (torch.randn(5, 2, 64, device=DEVICE).to(DTYPE) for _ in range(2))
    slots = torch.tensor([int(table[0, (11 + i) // 16]) * 16 + (11 + i) % 16 for i in range(5)], device=DEVICE)
    impl = backend.LabAttentionImpl(4, 64, 0.125, 2)
    impl.do_kv_cache_update(layer, new_k, new_v, kv_cache, slots)
    written_k, written_v = kv_cache.transpose(1, 2).split(64, dim=-1)
    for i, slot in enumerate(slots.tolist()):
        assert torch.equal(written_k[slot // 16, slot % 16], new_k[i])
        assert torch.equal(written_v[slot // 16, slot % 16], new_v[i])


@pytest.mark.parametrize("max_query_len, expected", [(1, 131136), (37, 250)])
def test_the_builder_plans_decode_splits_for_the_longest_allowed_sequence(max_query_len, expected):
    # a decode step (eager or captured) is planned for max_model_len; a prefill step for its own longest sequence
    from types import SimpleNamespace

    from vllm.v1.attention.backend import CommonAttentionMetadata

    config = SimpleNamespace(model_config=SimpleNamespace(max_model_len=131136))
    builder = backend.LabMetadataBuilder(None, ["layer.0"], config, torch.device(DEVICE))
    loc = torch.tensor([0, 1, 1 + max_query_len], dtype=torch.int32)
    common = CommonAttentionMetadata(query_start_loc=loc, query_start_loc_cpu=loc, seq_lens=torch.tensor(
        [100, 250], dtype=torch.int32), num_reqs=2, num_actual_tokens=1 + max_query_len, max_query_len=max_query_len,
        max_seq_len=250, block_table_tensor=torch.zeros(2, 16, dtype=torch.int32), slot_mapping=torch.zeros(1))
    for metadata in (builder.build(0, common), builder.build_for_cudagraph_capture(common)):
        assert metadata.split_keys == expected and metadata.seq_lens is common.seq_lens
        assert metadata.num_decodes == (2 if max_query_len == 1 else 1)  # the decoding sequence vLLM put first
    assert builder.reorder_batch_threshold == 1
    assert builder.get_cudagraph_support(config, None).name == "UNIFORM_SINGLE_TOKEN_DECODE"
