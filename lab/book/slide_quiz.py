"""A self-check quiz on slides: each question on a slide of its own, its answer on the next.

The class guesses first. A question's slide shows its prompt and options (a click still marks the pick right or
wrong: ``book/_static/quiz.js``), not its explanation; the next slide, "Self-check N: answer", shows the right
option, then the explanation and where its numbers come from as far as :data:`MAX_SLIDE_CHARS` allows; the rest
(the explanation's last sentences, then the sources) is in the speaker notes. A question whose prompt and options
alone run over opens with its setup (the prompt before its last sentence) on a slide of its own.

Reads the markup :class:`lab.book.quiz.Quiz` writes; a deck needs JavaScript anyway, so the quiz's
``<noscript>`` line is left off.
"""

from __future__ import annotations

import re

from lab.book.slide_text import MAX_SLIDE_CHARS, html_chars

_QUIZ = re.compile(r'(?P<head>.*?<div class="lab-quiz" [^>]*>)\s*<p class="lab-quiz-title">(?P<title>.*?)</p>'
                   r'(?P<body>.*?)<noscript>', re.S)
_QUESTION = re.compile(r'<div class="lab-quiz-question".*?</div></div>', re.S)
_NUMBER = re.compile(r'<span class="lab-quiz-number">(?P<n>\d+)\.</span>')
_PROMPT = re.compile(r'(?P<open><p class="lab-quiz-prompt">\s*<span class="lab-quiz-number">[^<]*</span>)'
                     r'\s*(?P<text>.*?)</p>', re.S)
_ANSWER = re.compile(r'data-answer="(?P<i>\d+)"')
_FEEDBACK = re.compile(r'<div class="lab-quiz-feedback".*(?=</div>$)', re.S)
_EXPLANATION = re.compile(r'<p class="lab-quiz-explanation">(?P<html>.*?)</p>', re.S)
_SOURCES = re.compile(r'<p class="lab-quiz-sources">.*?</p>', re.S)
#: The feedback a question slide keeps: quiz.js writes its verdict there ("Not quite: the answer is B.").
_EMPTY_FEEDBACK = '<div class="lab-quiz-feedback" data-feedback hidden><p class="lab-quiz-verdict" data-verdict></p></div>'
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\d<])")


def _option(question: str, index: int) -> str:
    m = re.search(rf'<button[^>]*data-option="{index}"[^>]*>(?P<html>.*?)</button>', question, re.S)
    return m["html"].strip() if m else ""


def _sentence_cuts(text: str) -> list[int]:
    """Where ``text`` (HTML) may be cut between sentences: outside any tag or element it opened."""
    return [m.start() for m in _SENTENCE_END.finditer(text)
            if text[:m.start()].count("<") == text[:m.start()].count(">")
            and len(re.findall(r"<[a-z]", text[:m.start()])) == len(re.findall(r"</", text[:m.start()]))]


def _answer_part(title: str, number: str, question: str) -> str:
    """The slide after a question: its right option, then as much of the explanation and sources as fits."""
    head = [f'<p class="lab-quiz-title">{title} {number}: answer</p>',
            f'<p class="lab-quiz-verdict lab-quiz-verdict-right">{_option(question, int(_ANSWER.search(question)["i"]))}</p>']
    explanation = _EXPLANATION.search(question)["html"].strip()
    sources = _SOURCES.search(question)
    shown, notes = list(head), []
    room = MAX_SLIDE_CHARS - html_chars("".join(head)) - 1
    fits = [c for c in [*_sentence_cuts(explanation), len(explanation)]
            if html_chars(explanation[:c]) <= room]
    cut = max(fits, default=0)  # whole sentences that fit; none: the answer line alone, the explanation in the notes
    if cut:
        shown.append(f'<p class="lab-quiz-explanation">{explanation[:cut].strip()}</p>')
        room -= html_chars(explanation[:cut]) + 1
    if explanation[cut:].strip():
        notes.append(f"<p>{explanation[cut:].strip()}</p>")
    if sources and not notes and html_chars(sources[0]) <= room:
        shown.append(sources[0])
    elif sources:
        notes.append(sources[0])
    aside = f'<aside class="notes">{"".join(notes)}</aside>' if notes else ""
    return '<div class="lab-quiz lab-quiz-answer">\n' + "\n".join(shown) + aside + "\n</div>"


def _question_parts(head: str, title_p: str, question: str) -> list[str]:
    """A question without its explanation; with its setup on a slide before it when the whole does not fit."""
    asked = _FEEDBACK.sub(_EMPTY_FEEDBACK, question)
    page = f"{head}\n{title_p}\n{asked}\n</div>"
    prompt = _PROMPT.search(asked)
    cuts = _sentence_cuts(prompt["text"]) if prompt else []
    if html_chars(page) <= MAX_SLIDE_CHARS or not cuts:
        return [page]
    setup, ask = prompt["text"][:cuts[-1]].strip(), prompt["text"][cuts[-1]:].strip()
    opening = f'{head}\n{title_p}\n<div class="lab-quiz-setup">{prompt["open"]} {setup}</p></div>\n</div>'
    asked = asked[:prompt.start()] + f'{prompt["open"]} {ask}</p>' + asked[prompt.end():]
    return [opening, f"{head}\n{title_p}\n{asked}\n</div>"]


def split_quiz_html(page: str) -> list[str]:
    """A quiz (``lab.book.quiz``'s markup) as slides: for each question, the question, then its answer."""
    m = _QUIZ.match(page)
    questions = _QUESTION.findall(m["body"]) if m else []
    if not questions:
        return [page]
    title_p = f'<p class="lab-quiz-title">{m["title"]}</p>'
    parts = []
    for question in questions:
        number = _NUMBER.search(question)
        parts += _question_parts(m["head"], title_p, question)
        parts.append(_answer_part(m["title"], number["n"] if number else "", question))
    return parts
