"""LinkTable: links shown by their titles, each cell naming its column."""

import pytest

from lab import LabError
from lab.book.link_table import LinkTable


def test_links_show_their_titles_not_their_addresses():
    table = LinkTable(["GPU", "sources"], [["H200 <SXM>", [("datasheet", "https://x.example/a?b=1&c=2"),
                                                          ("whitepaper", "https://x.example/w.pdf")]]])
    html = table._repr_html_()
    assert '<td data-label="GPU">H200 &lt;SXM&gt;</td>' in html
    assert ('<td data-label="sources"><a href="https://x.example/a?b=1&amp;c=2">datasheet</a><br>'
            '<a href="https://x.example/w.pdf">whitepaper</a></td>') in html
    assert html.startswith('<table class="lab-link-table"><thead><tr><th>GPU</th><th>sources</th></tr></thead><tbody>')
    assert "datasheet <https://x.example/a?b=1&c=2>" in repr(table)


def test_a_ragged_row_is_refused():
    with pytest.raises(LabError, match="row 0 has 1 cells for 2 columns"):
        LinkTable(["a", "b"], [["only one"]])


def test_an_address_in_a_text_cell_becomes_a_link_named_by_its_site():
    html = LinkTable(["note"], [["see the A10 datasheet (https://www.nvidia.com/a10.pdf?x=1&y=2)."]])._repr_html_()
    assert '(<a href="https://www.nvidia.com/a10.pdf?x=1&amp;y=2">nvidia.com</a>).' in html
