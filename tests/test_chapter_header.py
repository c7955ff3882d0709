"""The line under each chapter title: reading time, what runs where, what to read first, the deck."""

import pytest

from lab.book import chapter_header
from lab.book.chapter_header import CHAPTERS, header_html, reading_minutes
from lab.book.slides import toc_chapters


def test_every_chapter_in_the_toc_has_an_entry_and_prerequisites_exist():
    chapters = [stem for stem in toc_chapters() if stem != "glossary"]
    assert set(chapters) == set(CHAPTERS), set(chapters) ^ set(CHAPTERS)
    order = {stem: i for i, stem in enumerate(chapters)}
    for stem, info in CHAPTERS.items():
        assert info.runs.startswith("Runs anywhere")
        for before in info.before:
            assert before in order and order[before] < order[stem], f"{stem}: {before} is not an earlier chapter"


@pytest.mark.parametrize(("words", "minutes"), [(0, 1), (1, 1), (200, 1), (201, 2), (4600, 23)])
def test_reading_time_rounds_up_at_200_words_a_minute(words, minutes):
    assert chapter_header.READING_WPM == 200
    assert reading_minutes(words) == minutes


def test_header_line_names_the_needs_links_prerequisites_and_the_deck():
    line = header_html("05-decode-split-kv", 12, {"04-flashattention-triton": "FlashAttention <in> Triton"},
                       lambda stem: f"{stem}.html", "../slides/05-decode-split-kv.slides.html")
    assert line.startswith('<p class="lab-chapter-meta">About 12 min to read · Runs anywhere')
    assert "the live cells need an NVIDIA GPU" in line
    assert 'Before this: <a href="04-flashattention-triton.html">FlashAttention &lt;in&gt; Triton</a>' in line
    assert line.endswith('<a href="../slides/05-decode-split-kv.slides.html">Slides</a></p>')
    assert "Before this" not in header_html("intro", 3, {}, str, None)
