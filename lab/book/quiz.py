"""Self-check quizzes: multiple-choice questions whose numbers are read from the cached data.

A question's prompt, options and explanation are templates. Every number in an option comes from a
``{name}`` placeholder filled from the question's ``cites``: a :class:`Measured` value looked up in a
dataset table, or a :class:`Computed` one derived by ``lab`` (a ridge point, a ratio of two measured
values). Option templates may not contain a numeral of their own, so no measured figure is typed.
A question may also carry ``holds``, a predicate on the cited values that must be true for the
marked answer to be right (say, "FLEX's ITL grows more than FLASH's"); tests and rendering check it,
so a quiz whose claim the data stops supporting fails the build instead of teaching a wrong answer.

The HTML shows the options as buttons and keeps the answer hidden until the reader clicks one; then
it marks right or wrong and reveals the explanation. A quiz places the right answer of its questions at
consecutive letters (:meth:`Quiz.answer_slot`) and shuffles the other options by a seed, so the answers
spread over the letters; ``tests/test_quiz.py`` checks that balance, and option lengths, on the HTML. On the static site Sphinx loads
``book/_static/quiz.js`` and ``quiz.css``; in a live kernel (``LAB_STATIC`` unset) the same script
and style are emitted inline, guarded so they install once per page.
"""

from __future__ import annotations

import functools
import hashlib
import html
import random
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from lab import REPO_ROOT, LabError, env
from lab.book import fact_registry
from lab.results.facts import Fact, plain
from lab.results import data
from lab.results import data

QUIZ_JS = REPO_ROOT / "book" / "_static" / "quiz.js"
QUIZ_CSS = REPO_ROOT / "book" / "_static" / "quiz.css"
LETTERS = "ABCDEFGH"
# A numeral standing on its own ("37.3", "2", "1,024"); digits inside names such as FA3, H200 or A10G
# are not numerals.
_NUMERAL = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")


# --- numbers a question cites ----------------------------------------------------------------------

class Number:
    """A number a question states: where it comes from and how it is printed."""

    fmt: str

    def value(self) -> float:
        raise NotImplementedError

    def text(self) -> str:
        value = self.value()
        if self.fmt.endswith("d") and isinstance(value, float):
            if not value.is_integer():
                raise LabError(f"{self.source()}: {value} is not a whole number; cannot show it with format 'd'")
            value = int(value)
        return format(value, self.fmt)

    def source(self) -> str:
        raise NotImplementedError

    def datasets(self) -> tuple[str, ...]:
        return ()

    def origins(self) -> tuple[str, ...]:
        """Short names of where the number comes from (a dataset table, a lab function), for the reader."""
        return (self.source(),)


@functools.lru_cache(maxsize=64)
def _table(dataset: str, table: str, mtime: float):
    return data.load(dataset).csv(table)


@dataclass(frozen=True)
class Measured(Number):
    """One cell of a dataset table: ``column`` in the single row of ``table`` matching ``where``."""

    dataset: str
    table: str
    column: str
    where: tuple[tuple[str, object], ...]
    fmt: str = ".1f"

    def rows(self):
        path = data.load(self.dataset).file(self.table)
        table = _table(self.dataset, self.table, path.stat().st_mtime)
        for col in (self.column, *(k for k, _ in self.where)):
            if col not in table.columns:
                raise LabError(f"{path}: column '{col}' is missing (cited by a quiz question)")
        mask = True
        for key, want in self.where:
            mask = mask & (table[key] == want)
        return table[mask] if self.where else table

    def value(self) -> float | str:
        """The cell: a float for numeric columns, the text itself otherwise (a kernel name)."""
        rows = self.rows()
        if len(rows) != 1:
            raise LabError(f"{self.dataset}/{self.table}: {len(rows)} rows match {self._where_text()}; "
                           "a quiz question cites exactly one")
        cell = rows[self.column].iloc[0]
        return cell if isinstance(cell, str) else float(cell)

    def _where_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.where) or "(all rows)"

    def source(self) -> str:
        return f"{self.dataset}/{self.table}: {self.column} at {self._where_text()}"

    def datasets(self) -> tuple[str, ...]:
        return (self.dataset,)

    def origins(self) -> tuple[str, ...]:
        return (f"{self.dataset}/{self.table}",)


def measured(dataset: str, table: str, column: str, fmt: str = ".1f", **where) -> Measured:
    """Shorthand: ``measured(A10G, "sweep.csv", "itl_ms", arm="FLASH_ATTN", target_len=256)``."""
    return Measured(dataset, table, column, tuple(where.items()), fmt)


@dataclass(frozen=True)
class Computed(Number):
    """A number ``lab`` derives: ``fn(*inputs' values)``; ``what`` says how, for the reader."""

    what: str
    fn: Callable[..., float]
    inputs: tuple[Number, ...] = ()
    fmt: str = ".1f"

    def value(self) -> float:
        return float(self.fn(*(n.value() for n in self.inputs)))

    def source(self) -> str:
        return self.what

    def datasets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for n in self.inputs for d in n.datasets()))

    def origins(self) -> tuple[str, ...]:
        if not self.inputs:
            return (self.what,)
        return tuple(dict.fromkeys(o for n in self.inputs for o in n.origins()))


@dataclass(frozen=True)
class Cited(Number):
    """A number taken from a :class:`lab.results.facts.Fact`: the same value, source and quantity the pages glue
    (the quiz's cell records it in the page's fact registry, so the consistency test holds quizzes to it too)."""

    fact: Fact
    fmt: str = ".1f"

    def value(self) -> float | str:
        """The fact's number, or its text where it is one (a kernel's name)."""
        if not self.fact.measured:
            raise LabError(f"{self.fact.source}: not measured; a quiz question cannot cite it")
        value = plain(self.fact.value)
        return value if isinstance(value, str) else float(value)

    def source(self) -> str:
        return self.fact.source



def cite(facts: dict[str, Fact], **names: tuple[str, str]) -> dict[str, Cited]:
    """placeholder -> Cited(the page's fact, format), for ``placeholder=(glue name, format)``."""
    return {key: Cited(facts[name], fmt) for key, (name, fmt) in names.items()}


def ratio(a: Number, b: Number, fmt: str = ".1f", what: str = "") -> Computed:
    """a / b, e.g. the FLEX/FLASH ratio of two measured times."""
    return Computed(what or f"ratio of {a.source()} to {b.source()}", lambda x, y: x / y, (a, b), fmt)


def growth_pct(short: Number, long: Number, fmt: str = ".0f") -> Computed:
    """Percent growth from ``short`` to ``long``."""
    return Computed(f"growth from {short.source()} to {long.source()}", lambda s, l_: 100 * (l_ / s - 1),
                    (short, long), fmt)


# --- questions -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rendered:
    prompt: str
    options: tuple[str, ...]
    explanation: str
    correct: int
    sources: tuple[str, ...]

    @property
    def answer(self) -> str:
        return self.options[self.correct]

    def shuffled(self, slot: int | None = None) -> Rendered:
        """The options in a fixed pseudo-random order seeded by the prompt, so a rebuilt page shows the same order.

        ``slot`` puts the right answer at that position (modulo the number of options) and shuffles only the
        others: a quiz passes each question's position, so its right answers rotate through the letters
        instead of depending on how the seeds happen to fall.
        """
        seed = int(hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()[:16], 16)
        order = list(range(len(self.options)))
        random.Random(seed).shuffle(order)
        if slot is not None:
            order.remove(self.correct)
            order.insert(slot % len(self.options), self.correct)
        return Rendered(self.prompt, tuple(self.options[i] for i in order), self.explanation,
                        order.index(self.correct), self.sources)


def _placeholders(template: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise LabError(f"quiz template {template[:60]!r}: {exc}") from None


@dataclass(frozen=True)
class Question:
    """A multiple-choice question; ``correct`` is the index of the one right option."""

    prompt: str
    options: Sequence[str]
    correct: int
    explanation: str
    cites: Mapping[str, Number] = field(default_factory=dict)
    holds: Callable[[dict[str, float]], bool] | None = None

    def values(self) -> dict[str, float]:
        return {name: number.value() for name, number in self.cites.items()}

    def validate(self) -> Rendered:
        """Check the question is well formed and its claim holds on the data; return it rendered."""
        where = f"quiz question {self.prompt[:50]!r}"
        if len(self.options) < 2:
            raise LabError(f"{where}: needs at least two options, has {len(self.options)}")
        if len(self.options) > len(LETTERS):
            raise LabError(f"{where}: at most {len(LETTERS)} options")
        if not isinstance(self.correct, int) or not 0 <= self.correct < len(self.options):
            raise LabError(f"{where}: correct={self.correct!r} is not the index of an option (0..{len(self.options) - 1})")
        used = set()
        for template in (self.prompt, *self.options, self.explanation):
            used |= _placeholders(template)
        missing = used - set(self.cites)
        if missing:
            raise LabError(f"{where}: placeholder {{{sorted(missing)[0]}}} has no entry in cites")
        unused = set(self.cites) - used
        if unused:
            raise LabError(f"{where}: cites {sorted(unused)[0]!r} but never shows it")
        for option in self.options:
            bare = re.sub(r"\{[^{}]*\}", "", option)
            typed = _NUMERAL.search(bare)
            if typed:
                raise LabError(f"{where}: option {option!r} types the number {typed.group(0)!r}; "
                               "put it in cites and write a {placeholder}")
        rendered = self.render()
        seen = {}
        for i, option in enumerate(rendered.options):
            norm = " ".join(option.lower().split())
            if norm in seen:
                raise LabError(f"{where}: options {LETTERS[seen[norm]]} and {LETTERS[i]} read the same: {option!r}")
            seen[norm] = i
        if self.holds is not None and not self.holds(self.values()):
            raise LabError(f"{where}: the data no longer supports the marked answer {rendered.answer!r}")
        return rendered

    def render(self) -> Rendered:
        texts = {name: number.text() for name, number in self.cites.items()}
        fill = lambda template: template.format_map(texts)
        return Rendered(fill(self.prompt), tuple(fill(o) for o in self.options), fill(self.explanation),
                        self.correct, tuple(dict.fromkeys(o for n in self.cites.values() for o in n.origins())))


# --- HTML ------------------------------------------------------------------------------------------

def _inline(text: str) -> str:
    """Escape text and turn `code` spans into <code> (the only markup questions use)."""
    parts = html.escape(text, quote=False).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


_static = env.static_build


@dataclass(frozen=True)
class Quiz:
    """A titled list of questions; displays as HTML in Jupyter and in the built book."""

    key: str
    questions: Sequence[Question]
    title: str = "Self-check"

    def __post_init__(self):
        if not _KEY.match(self.key):
            raise LabError(f"quiz key {self.key!r}: use lowercase letters, digits and dashes")
        if not self.questions:
            raise LabError(f"quiz {self.key!r} has no questions")

    def answer_slot(self, index: int) -> int:
        """Where the right answer of question ``index`` goes: consecutive questions take consecutive letters,
        starting at a letter picked by the quiz's key (so every quiz does not open with A)."""
        start = int(hashlib.sha256(self.key.encode("utf-8")).hexdigest()[:8], 16)
        return start + index

    def to_html(self, inline_assets: bool | None = None) -> str:
        inline_assets = not _static() if inline_assets is None else inline_assets
        out = []
        if inline_assets:  # a live kernel: no Sphinx to load the static files, so ship them in the output
            out.append(f"<style>{QUIZ_CSS.read_text(encoding='utf-8')}</style>")
            out.append(f"<script>{QUIZ_JS.read_text(encoding='utf-8')}</script>")
        out.append(f'<div class="lab-quiz" data-quiz="{self.key}">')
        out.append(f'<p class="lab-quiz-title">{html.escape(self.title)}</p>')
        out.append('<p class="lab-quiz-hint">Pick an answer to check it; the explanation appears after you choose.</p>')
        for qi, question in enumerate(self.questions):
            r = question.validate().shuffled(self.answer_slot(qi))
            out.append(f'<div class="lab-quiz-question" data-question="{qi}" data-answer="{r.correct}">')
            out.append(f'<p class="lab-quiz-prompt"><span class="lab-quiz-number">{qi + 1}.</span> {_inline(r.prompt)}</p>')
            out.append('<div class="lab-quiz-options" role="group">')
            for oi, option in enumerate(r.options):
                out.append(f'<button type="button" class="lab-quiz-option" data-option="{oi}">'
                           f'<span class="lab-quiz-letter">{LETTERS[oi]}</span> {_inline(option)}</button>')
            out.append("</div>")
            out.append('<div class="lab-quiz-feedback" data-feedback hidden>')
            out.append('<p class="lab-quiz-verdict" data-verdict></p>')
            out.append(f'<p class="lab-quiz-explanation">{_inline(r.explanation)}</p>')
            if r.sources:
                out.append('<p class="lab-quiz-sources">Numbers from: '
                           + "; ".join(f"<code>{html.escape(s)}</code>" for s in r.sources) + "</p>")
            out.append("</div></div>")
        out.append('<noscript><p class="lab-quiz-hint">Checking answers needs JavaScript.</p></noscript>')
        out.append("</div>")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:  # text/plain face: the questions without their answers
        lines = [self.title]
        for qi, question in enumerate(self.questions):
            r = question.render().shuffled(self.answer_slot(qi))
            lines.append(f"{qi + 1}. {r.prompt}")
            lines += [f"   {LETTERS[i]}. {o}" for i, o in enumerate(r.options)]
        return "\n".join(lines)


def chapter_quiz(key: str, questions: Callable[[], list[Question]]) -> Quiz:
    """A chapter's self-check: its questions under its key (the chapter's file stem). The numbers its options
    cite are recorded in the page's fact registry, so the consistency test holds the quiz to the chapter."""
    quiz = Quiz(key=key, questions=questions())
    cited = {f"quiz {qi + 1} of {key}: {name}": found for qi, question in enumerate(quiz.questions)
             for name, number in question.cites.items() for found in _facts_in(number)}
    fact_registry.record({name: number.fact for name, number in cited.items()},
                         {name: number.text() for name, number in cited.items()})
    return quiz


def _facts_in(number) -> list[Cited]:
    """The facts a cited number shows or is computed from (a share of the ceiling cites the ceiling)."""
    if isinstance(number, Cited):
        return [number]
    return [found for part in getattr(number, "inputs", ()) for found in _facts_in(part)]
