"""A package face: the public names of its modules, found on use (``rc.load_stage1``, ``from ... import``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


def face(
    package: str, modules: Sequence[ModuleType]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for a package that gathers its modules' ``__all__``.

    Args:
        package: The package's ``__name__`` (for the error message).
        modules: The modules whose ``__all__`` names the package offers; a name in two modules is an error.

    Returns:
        ``(__all__, __getattr__, __dir__)`` to assign in the package's ``__init__``.

    Raises:
        ValueError: If two modules offer the same name.
    """
    home: dict[str, ModuleType] = {}
    for module in modules:
        for name in module.__all__:
            if name in home:
                raise ValueError(f"{package}: {name!r} is in {home[name].__name__} and {module.__name__}")
            home[name] = module

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook
        if name in home:
            return getattr(home[name], name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:  # noqa: N807
        return sorted({*home, *(m.__name__.rsplit(".", 1)[-1] for m in modules)})

    return sorted(home), __getattr__, __dir__
