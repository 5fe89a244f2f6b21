"""Options: the one rule that merges keyword overrides into options dataclasses, and the one range check.

A function with many knobs takes ``options=`` (a dataclass) and the same fields as plain keywords, so
``get_embedder("minilm", device="cpu")`` and ``get_embedder("minilm", options=EmbedderOptions(device="cpu"))``
are one call. An unknown keyword is a :class:`TypeError` naming the closest field, as Python names an
unexpected keyword argument. :func:`check_number` is the range check of every numeric parameter (and,
through ``pv4kit.cli._args``, of every numeric command-line option).
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
from collections.abc import Iterable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["check_number", "check_option_names", "merge_options"]


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


def check_number(
    value: Any,
    name: str | None,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    integer: bool = False,
    allow_none: bool = False,
) -> Any:
    """Return ``value`` when it is a number within the bounds; else raise naming the parameter.

    Args:
        value: The number given.
        name: The parameter's name, first in the message (``None``: the message starts at "must").
        ge: Smallest value allowed.
        gt: ``value`` must be above this.
        le: Largest value allowed.
        lt: ``value`` must be below this.
        integer: Whether only an ``int`` (not a ``bool``) is allowed.
        allow_none: Whether ``None`` is allowed (an option left to its default).

    Raises:
        ValueError: ``"n_boot must be an integer >= 1, got 0"`` (NaN is outside every bound).
    """
    if value is None and allow_none:
        return value
    bounds = [f"{op} {b}" for op, b in ((">=", ge), (">", gt), ("<=", le), ("<", lt)) if b is not None]
    kind = "an integer" if integer else "a number"
    ok = isinstance(value, numbers.Integral if integer else numbers.Real) and not isinstance(value, bool)
    if ok:  # written so that NaN fails every bound
        ok = (
            (ge is None or value >= ge)
            and (gt is None or value > gt)
            and (le is None or value <= le)
            and (lt is None or value < lt)
        )
    if not ok:
        prefix = f"{name} " if name else ""
        raise ValueError(
            f"{prefix}must be {kind}{' ' if bounds else ''}{' and '.join(bounds)}, got {value!r}"
        )
    return value
