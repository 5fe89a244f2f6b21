"""Words: the one English stop-word list of pv4kit, word tokens for BM25 and content words for the audits."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

#: pv4kit's one English stop-word list, dropped alike by BM25 retrieval and the audits' word overlap
STOPWORDS: frozenset[str] = frozenset(
    """a an the and or but if then else than so of to in on at by for with from as into onto over under
    about is are was were be been being am do does did doing done have has had having i me my mine we our
    ours you your yours he him his she her hers it its they them their theirs this that these those there
    here what which who whom whose when where why how not no nor too very can will just should would could
    may might must shall s t up out off more most less also only own same such some any all each both few
    other another while before after again once during through until against between per via one
    two""".split()
)

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_CONTENT_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")


def tokenize(
    text: Any,
    *,
    lowercase: bool = True,
    stopwords: Iterable[str] | None = STOPWORDS,
    min_length: int = 1,
) -> list[str]:
    """Split ``text`` into word tokens (letters and digits; an inner apostrophe is kept), in order.

    ``None`` or NaN gives an empty list; ``stopwords`` are compared after lower-casing (``None``: keep all),
    and tokens shorter than ``min_length`` characters are dropped.
    """
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    stop = frozenset(stopwords or ())
    tokens = (t.lower() if lowercase else t for t in _TOKEN.findall(str(text)))
    return [t for t in tokens if len(t) >= min_length and t.lower() not in stop]


def content_words(text: Any) -> set[str]:
    """The distinct lower-cased words of ``text`` longer than two characters, stop words left out."""
    if not isinstance(text, str):
        return set()
    return {w for w in _CONTENT_WORD.findall(text.lower()) if len(w) > 2 and w not in STOPWORDS}


# the reference's list-item marker: digits, a dot, the spaces after it (``2.5-hour`` loses its ``2.``)
_REFERENCE_MARKER = re.compile(r"^[0-9]+\.\s*")
#: a list-item marker as pv4kit reads loose lists: ``1.``, ``1)`` or ``1 .`` not followed by a digit
#: (``2.5-hour`` is no marker), or ``-``, ``*``, ``•`` followed by a space; then the spaces after it
LIST_MARKER = re.compile(r"^\s*(?:\d{1,3}\s*[.)](?!\d)|[-*\u2022](?=\s|$))\s*")


def list_items(text: str, *, loose: bool = False, marked_only: bool = False) -> list[str]:
    """The items of a numbered (or bulleted) list reply: pv4kit's one list reading.

    By default the reference's rule (``parse_numbered_list`` in its ``generate.py``): split the stripped text
    on ``\\n``, drop blank lines, strip each and remove one leading ``digits.`` with the spaces after it (an
    item that was only a number stays, empty). ``loose``: remove a :data:`LIST_MARKER` (``1.``, ``1)``,
    ``1 .``, ``-``, ``*``, ``•``) instead and drop empty items; ``marked_only`` (with ``loose``): keep only
    the lines that carry a marker (a heading or a sentence around the list is not an item).
    """
    if not loose:
        lines = [line.strip() for line in text.strip().split("\n")]
        return [_REFERENCE_MARKER.sub("", line) for line in lines if line]
    lines = [line for line in text.splitlines() if LIST_MARKER.match(line) or not marked_only]
    items = [LIST_MARKER.sub("", line, count=1).strip() for line in lines]
    return [item for item in items if item]
