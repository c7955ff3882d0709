"""A later page quotes what an earlier page glued: the same fact, under the same glue name, without reading
its data again.

The interview page and the course kit state numbers that other chapters teach. Each of those chapters glued
its facts while the book built, and the fact registry (:mod:`lab.book.fact_registry`) holds every one as its
page stated it: value, source, quantity, run and the text shown. :func:`quoted` hands them back as facts, so
the later page glues exactly what the teaching page glued (the registry refuses anything else), and it needs
none of the teaching page's modules, figures or kernels to do it (``tests/test_reach.py``).

    quoted({"book/05-decode-split-kv": ("dec_tokens_at_ridge", "h200_ridge_measured")})
    quoted({"book/06-vllm-sweeps": ("h200_common_len",)}, shown={"h200_common_len": ",d"})   # 32,768

The pages a page quotes must build before it (the book builds in file order: 01 ... 09, then the appendix).
A page executed on its own (jupytext, nbclient) quotes the last site build's registry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lab import REPO_ROOT, LabError
from lab.book import fact_registry
from lab.results.facts import Fact

#: Where the registry of the last site build lies, for a page executed on its own.
LAST_BUILD = REPO_ROOT / "_build" / "facts"


def registry_folder() -> Path:
    """This build's fact registry (set by lab.book.sphinxext while the book builds), else the last build's."""
    folder = Path(os.environ.get(fact_registry.FOLDER_ENV) or LAST_BUILD)
    if not folder.is_dir():
        raise LabError(f"{folder}: no fact registry to quote from; build the site first (scripts/build_site.sh)")
    return folder


def as_fact(entry: fact_registry.Entry) -> Fact:
    """A registry entry as the fact its page glued: the same value, source, quantity and run, shown as it was."""
    shown = entry.shown
    # glued as text ("97%"): the same text here (a format that prints the value as nothing, then the text)
    text = isinstance(shown, str) and shown != entry.value
    fmt = "{0!s:.0}" + shown.replace("{", "{{").replace("}", "}}") if text else ""
    return Fact(entry.value, entry.source or f"{entry.page} (glued there)", fmt, quantity=entry.quantity,
                unit=entry.unit, method=entry.method, run=entry.run)


def quoted(wanted: Mapping[str, tuple[str, ...]], folder: Path | None = None,
           shown: Mapping[str, str] | None = None) -> dict[str, Fact]:
    """Each glue name of ``wanted`` (page -> names) as the fact that page glued; a LabError naming every name
    a page did not glue. ``shown`` (glue name -> format) shows a fact its page glued as a bare number in the
    quoting page's format (the same value, quantity and source: the registry compares the numbers shown)."""
    entries = fact_registry.read(folder or registry_folder())
    glued = {(e.page, e.name): e for e in entries if not e.name.startswith("quiz ")}
    out, missing = {}, []
    for page, names in wanted.items():
        for name in names:
            if (page, name) in glued:
                out[name] = as_fact(glued[(page, name)])
                if shown and name in shown:
                    out[name] = out[name].shown_as(shown[name])
            else:
                missing.append(f"{page}: {name}")
    if missing:
        raise LabError("nothing glued as " + ", ".join(missing) + " (those pages build before this one)")
    return out

