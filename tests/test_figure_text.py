"""lab.book.plots holds every figure's text to 9 CSS px on a phone and writes its smallest text into the PNG."""

from __future__ import annotations

import io
import struct
import zlib

import matplotlib.pyplot as plt
import pytest

from lab.book.plots import MIN_TEXT_PX, PHONE_COLUMN_PX, PNG_TEXT_KEY, figure, min_font_pt
from lab.book.plots.roofline import plot_roofline
from lab.results.hardware import device
from lab.results.roofline import Kernel, datasheet_roof


def png_text(data: bytes) -> dict[str, str]:
    """The text chunks (tEXt, zTXt, iTXt) of a PNG, key -> value."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    found, pos = {}, 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            found[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b"\0")
            _translated, _, value = rest.partition(b"\0")
            found[key.decode("latin-1")] = (zlib.decompress(value) if compressed else value).decode("utf-8")
        pos += 12 + length
    return found


def shown_px(data: bytes, column_px: float) -> float:
    """The PNG's smallest text in CSS px when shown at min(its width, the column)."""
    width = struct.unpack(">I", data[16:20])[0]
    return float(png_text(data)[PNG_TEXT_KEY]) * min(width, column_px) / width


def test_a_five_point_label_is_raised_and_the_png_says_how_small_its_text_is():
    fig, ax = figure(figsize=(7.0, 4.0))
    tiny = ax.set_xlabel("tiny", fontsize=5)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    data = buffer.getvalue()
    assert tiny.get_fontsize() > 5 and tiny.get_fontsize() >= min_font_pt(7.0, fig.dpi)
    least = float(png_text(data)[PNG_TEXT_KEY])
    assert least == pytest.approx(min(t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text()) * fig.dpi / 72,
                                  rel=1e-3)
    # shown on a phone (scaled down to the column) and at its own size on a laptop: 9 px or more
    assert shown_px(data, PHONE_COLUMN_PX) >= MIN_TEXT_PX - 1e-3
    assert shown_px(data, 757) >= MIN_TEXT_PX - 1e-3


def test_the_inline_backends_print_call_carries_the_chunk_too():
    from IPython.core.pylabtools import print_figure

    fig, ax = figure()
    ax.plot([1, 2], [3, 4], label="a line")
    ax.legend(fontsize=4)
    data = print_figure(fig, "png", bbox_inches="tight")   # what Jupyter's inline backend does
    plt.close(fig)
    assert shown_px(data, PHONE_COLUMN_PX) >= MIN_TEXT_PX - 1e-3


def test_superscripts_are_held_to_the_floor_at_their_drawn_size():
    fig, ax = figure()
    power = ax.text(0.5, 0.5, r"$n^2$", fontsize=10)
    plain = ax.text(0.1, 0.1, "n", fontsize=10)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    assert plain.get_fontsize() == 10 < power.get_fontsize()   # 10 pt is enough, a 7 pt exponent is not
    assert power.get_fontsize() * 0.7 >= min_font_pt(fig.get_figwidth(), fig.dpi)
    assert shown_px(buffer.getvalue(), PHONE_COLUMN_PX) >= MIN_TEXT_PX - 1e-3


def test_other_formats_are_written_without_the_chunk():
    fig, ax = figure()
    ax.set_title("t")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    assert buffer.getvalue().lstrip().startswith(b"<?xml")


def test_the_png_says_what_the_figure_shows():
    from lab.book.plots import caption, figure, legend_above
    from lab.book.plots.alt_text import ALT_KEY, png_alt

    fig, (line, bars) = figure(2, 1)
    line.plot([1, 2], [3, 4], label="FLASH_ATTN")
    line.plot([1, 2], [2, 5], label="$n^2$ term")
    line.set_xlabel("prompt length (tokens)")
    line.set_ylabel("time to first token (s)")
    legend_above(line, title="prefill")
    bars.barh([0, 1], [3, 4])
    bars.set_yticks([0, 1], ["FlashAttention", "FlexAttention"])
    bars.set_xlabel("GPU time (ms)")
    caption(line, "NVIDIA A10G, vLLM 0.11.0")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert png_text(buffer.getvalue())[ALT_KEY] == png_alt(buffer.getvalue()) == (
        "Chart. Panel 'prefill': time to first token (s) against prompt length (tokens); series: FLASH_ATTN, "
        "n^2 term. GPU time (ms) for FlashAttention, FlexAttention. Source: NVIDIA A10G, vLLM 0.11.0")
    assert png_alt(b"not a png") is None


def test_roofline_legend_writes_intensities_as_the_prose_does():
    """Thousands separators, never the exponent form (2.12e+03) the legend once showed beside the prose's 2,115."""
    kernels = [Kernel("matmuls", 2115.0 * 1e6, 1e6), Kernel("softmax", 0.625 * 1e6, 1e6)]
    ax = plot_roofline(datasheet_roof(device("H100-SXM"), "bf16"), kernels)
    texts = [t.get_text().replace("\n", " ") for t in ax.get_legend().get_texts()]
    plt.close(ax.figure)
    assert any("2,115 FLOP/B" in t for t in texts) and any("0.625 FLOP/B" in t for t in texts), texts
    assert not any("e+" in t for t in texts), texts
