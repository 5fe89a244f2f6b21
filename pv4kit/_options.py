"""Options dataclasses: the one rule that merges keyword overrides into them.

A function with many knobs takes ``options=`` (a dataclass) and the same fields as plain keywords, so
``get_embedder("minilm", device="cpu")`` and ``get_embedder("minilm", options=EmbedderOptions(device="cpu"))``
are one call. An unknown keyword is a :class:`TypeError` naming the closest field, as Python names an
unexpected keyword argument.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["check_option_names", "merge_options"]


def check_option_names(
    cls: type, given: Iterable[str], *, where: str, noun: str = "an unexpected keyword argument"
) -> None:
    """Raise for the first name of ``given`` that is no field of the dataclass ``cls``.

    Args:
        cls: The options dataclass.
        given: The keyword names passed.
        where: The function's name, for the message (``"get_embedder"``).
        noun: What an unknown name is called in the message.

    Raises:
        TypeError: ``"<where>() got <noun> 'x'; did you mean 'y'?"`` (or the list of fields when none is
            close).
    """
    names = [f.name for f in dataclasses.fields(cls)]
    for key in given:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; options: {', '.join(names)}"
            raise TypeError(f"{where}() got {noun} {key!r}{hint}")


def merge_options(
    cls: type[T],
    options: T | None,
    overrides: dict[str, Any],
    *,
    where: str,
    noun: str = "an unexpected keyword argument",
) -> T:
    """``options`` (default ``cls(**overrides)``) with the keyword ``overrides`` replaced.

    Raises:
        TypeError: An override that is no field of ``cls`` (see :func:`check_option_names`), ``options``
            of another type, or (without ``options``) a required field missing from ``overrides``.
    """
    if options is not None and not isinstance(options, cls):
        raise TypeError(f"{where}(): options must be a {cls.__name__}, got {type(options).__name__}")
    check_option_names(cls, overrides, where=where, noun=noun)
    if options is None:
        return cls(**overrides)
    return dataclasses.replace(options, **overrides) if overrides else options  # type: ignore[type-var]
