"""The kernel explorers over the committed H200 benchmarks (the race of record first, then data/h200/kernels)."""

import math

from lab.book.kernel_explorers import decode_explorer, kernel_runs, prefill_explorer


def test_prefill_explorer_default_is_the_tuned_kernel_at_the_longest_length():
    explorer = prefill_explorer()
    view = explorer.compute()
    readouts = {r.name: r.value for r in view.readouts}
    ds, prefill, _ = next(iter(kernel_runs().values()))
    row = prefill[(prefill.candidate == "ours-tuned") & (prefill.n == prefill.n.max())].iloc[0]
    assert readouts["ms"] == row.ms and readouts["tflops"] == row.tflops
    assert 0 < readouts["vs_fastest"] <= 1
    assert view.chart.source.startswith("NVIDIA H200")


def test_the_default_run_is_the_race_with_flashattention_itself():
    from lab.results.kernel_runs import RACE

    explorer = prefill_explorer()
    assert next(iter(kernel_runs())) == RACE
    for backend in ("ours-tuned", "fa2", "fa3", "fa4"):
        view = explorer.compute(backend=backend)
        assert all(r.text != "n/a" for r in view.readouts), backend  # the default length: every FA measured
    assert "128.00 GiB" in explorer.compute(backend="flex-flash").note  # create_block_mask's O(n^2) build at 128k
    assert "not measured" in explorer.compute(backend="naive").note


def test_prefill_explorer_explains_a_skipped_candidate():
    view = prefill_explorer().compute(run="h200/kernels", length=32768, backend="naive")
    assert "skipped" in view.note and "GB" in view.note
    assert all(r.text == "n/a" for r in view.readouts if r.name in ("ms", "tflops"))


def test_decode_explorer_readouts_and_missing_point():
    explorer = decode_explorer()
    assert len(explorer.combinations()) <= 1500
    view = explorer.compute(context=32768, batch=16, backend="ours-tuned")
    readouts = {r.name: r.value for r in view.readouts}
    # bandwidth = K and V once: 2 * 16 * 4 * 32768 * 128 * 2 bytes plus q and o, over the time
    assert math.isclose(readouts["gbps"] * 1e9 * readouts["ms"] * 1e-3,
                        2 * 16 * 4 * 32768 * 128 * 2 + 2 * 16 * 28 * 128 * 2, rel_tol=1e-6)


def test_decode_explorer_says_when_a_point_was_not_measured(monkeypatch):
    from lab.book import kernel_explorers

    runs = kernel_explorers.kernel_runs()
    name, (ds, prefill, decode) = next((k, run) for k, run in runs.items() if run[2] is not None)
    cut = decode[~((decode.candidate == "ours-tuned") & (decode.batch == 16) & (decode.n == 131072))]
    monkeypatch.setattr(kernel_explorers, "kernel_runs", lambda: {**runs, name: (ds, prefill, cut)})
    missing = kernel_explorers.decode_explorer().compute(context=131072, batch=16, backend="ours-tuned")
    assert "not measured" in missing.note


def test_prefill_explorer_takes_a_partial_run(monkeypatch):
    """A run with fewer lengths or candidates (the repeats, a reader's quick run) still renders statically."""
    from lab.book import kernel_explorers

    runs = kernel_explorers.kernel_runs()
    ds, prefill, _ = next(iter(runs.values()))
    partial = prefill[(prefill.n == prefill.n.max()) & (prefill.candidate != "naive")]
    monkeypatch.setattr(kernel_explorers, "kernel_runs", lambda: {**runs, "partial": (ds, partial, None)})
    explorer = kernel_explorers.prefill_explorer()
    explorer.static_data()   # raises if any combination breaks the shared readout layout
    short = explorer.compute(run="partial", length=int(prefill.n.min()), backend="ours-tuned")
    assert "not measured" in short.note
    long = explorer.compute(run="partial", length=int(prefill.n.max()), backend="ours-tuned")
    assert long.note.startswith("fastest at")
