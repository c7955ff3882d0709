"""The intro's answer figure: one line per GPU and phase, from the measured sweeps."""

from lab.book.plots.answer import plot_answer
from lab.results import sweeps


def test_answer_figure_from_the_sweeps():
    table = sweeps.sweeps()
    study = sweeps.find_study(table, "A10G")
    ratios = sweeps.compare_arms(table, study, "FLEX_ATTENTION", "FLASH_ATTN")
    assert (ratios["TTFT ratio"].iloc[-1] > ratios["TTFT ratio"].iloc[0])  # the gap grows with the prompt
    fig = plot_answer({"A10G study": ("A10G", ratios)}, source="test")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert sum("prefill" in label for label in labels) == 1 and sum("decode" in label for label in labels) == 1
