"""The book's question and its answer in one figure: how much slower serving gets without FlashAttention,
in prefill (time to first token) and decode (inter-token latency), as prompts grow, on each GPU measured."""

from __future__ import annotations

from lab.book.plots import caption, color, figure


def plot_answer(comparisons: dict, source: str):
    """``comparisons``: label (a GPU and engine) -> table of lab.results.sweeps.compare_arms (n, TTFT ratio, ITL ratio).

    Solid lines: prefill (TTFT ratio); dashed: decode (ITL ratio); a line at 1 marks "no difference".
    """
    fig, ax = figure(figsize=(7.5, 4.3))
    for label, (key, table) in comparisons.items():
        for column, style, phase in (("TTFT ratio", "o-", "prefill (time to first token)"),
                                     ("ITL ratio", "s--", "decode (time per output token)")):
            ax.plot(table["n"], table[column], style, ms=4, color=color(key), label=f"{label}: {phase}")
            last = table.iloc[-1]
            ax.annotate(f"{last[column]:.1f}×", (last["n"], last[column]), xytext=(4, 0), textcoords="offset points",
                        fontsize=8, va="center", color=color(key))
    ax.axhline(1.0, color="#555555", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ticks = sorted({int(n) for _, t in comparisons.values() for n in t["n"]})
    ax.set_xticks(ticks[::2] if len(ticks) > 6 else ticks, [f"{n:,}" for n in (ticks[::2] if len(ticks) > 6 else ticks)])
    ax.minorticks_off()
    ax.set_xlabel("prompt length = context length (tokens)")
    ax.set_ylabel("time with FLEX_ATTENTION ÷ time with FlashAttention")
    ax.set_title("Where does FlashAttention win? Where prompts and contexts are long", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(bottom=0.2)
    caption(ax, source)
    return fig
