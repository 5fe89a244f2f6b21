"""The range check of every numeric parameter and command-line option (:func:`check_number`)."""

from __future__ import annotations

import numbers
import operator
from typing import Any

_COMPARE = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


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
    """Return ``value`` when it is a number (an ``int`` with ``integer``) within the bounds, else raise.

    The bounds are ``value >= ge``, ``> gt``, ``<= le``, ``< lt``; ``integer`` refuses a ``bool``; ``None``
    passes with ``allow_none``. ``name`` starts the message (``None``: it starts at "must").

    Raises:
        ValueError: ``"n_boot must be an integer >= 1, got 0"`` (NaN is outside every bound).
    """
    if value is None and allow_none:
        return value
    bounds = [(op, b) for op, b in ((">=", ge), (">", gt), ("<=", le), ("<", lt)) if b is not None]
    ok = isinstance(value, numbers.Integral if integer else numbers.Real) and not isinstance(value, bool)
    if not ok or not all(_COMPARE[op](value, b) for op, b in bounds):  # NaN fails every comparison
        text = " and ".join(f"{op} {b}" for op, b in bounds)
        kind = "an integer" if integer else "a number"
        raise ValueError(
            f"{f'{name} ' if name else ''}must be {kind}{' ' if text else ''}{text}, got {value!r}"
        )
    return value
