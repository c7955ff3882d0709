"""The book's question and its answer in one figure: how much slower serving gets without FlashAttention,
in prefill (time to first token) and decode (inter-token latency), as prompts grow, on each GPU measured."""

from __future__ import annotations

from lab.book.plots import WIDTH_IN, caption, color, figure, floor_pt, style_legend, token_axis


def plot_answer(comparisons: dict, source: str):
    """``comparisons``: label (a GPU and engine) -> table of lab.results.sweeps.compare_arms (n, TTFT ratio, ITL ratio).

    Solid lines: prefill (TTFT ratio); dashed: decode (ITL ratio); a line at 1 marks "no difference".
    """
    fig, ax = figure(figsize=(WIDTH_IN, 5.4))
    small = floor_pt(fig)
    for label, (key, table) in comparisons.items():
        for column, style, phase in (("TTFT ratio", "o-", "prefill (time to first token)"),
                                     ("ITL ratio", "s--", "decode (time per output token)")):
            ax.plot(table["n"], table[column], style, ms=4, color=color(key), label=f"{label}: {phase}")
            last = table.iloc[-1]
            ax.annotate(f"{last[column]:.1f}×", (last["n"], last[column]), xytext=(4, 0), textcoords="offset points",
                        fontsize=small, va="center", color=color(key))
    ax.axhline(1.0, color="#555555", lw=0.8, ls=":")
    token_axis(ax, [int(n) for _, t in comparisons.values() for n in t["n"]], max_ticks=5)
    ax.margins(x=0.12)  # room for the last value written beside each line
    ax.set_xlabel("prompt length = context length (tokens)")
    ax.set_ylabel("time with FLEX_ATTENTION ÷\ntime with FlashAttention")
    fig.suptitle("Where does FlashAttention win?\nWhere prompts and contexts are long", fontsize=11)
    style_legend(ax, {label: color(key) for label, (key, _) in comparisons.items()},
                 {"prefill (time to first token)": {"ls": "-", "marker": "o", "ms": 4},
                  "decode (time per output token)": {"ls": "--", "marker": "s", "ms": 4}})
    caption(ax, source)
    return fig
