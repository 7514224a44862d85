"""Prompt levers: each way repomem changes what the model is shown, one module each.

The strategy table (repomem.strategies) lists, per strategy, the levers it uses, by name; the
engine runs them at its stages through the hooks of `levers.base.PromptLever` and names none of
them. A lever's settings switch it on or off (`PromptLever.applies`).

Adding a lever is one module here holding a `PromptLever` subclass with a `name` (LEVERS finds
it) and its name in the strategies that should use it (docs/extending.md walks through one).
"""

from __future__ import annotations

import importlib
import pkgutil

from repomem.completion.levers.base import PromptLever


def _levers_in_package() -> dict[str, type[PromptLever]]:
    """Every named PromptLever subclass defined in this package's modules, by name."""
    found: dict[str, type[PromptLever]] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, PromptLever) and value.name
                    and value.__module__ == module.__name__):
                if value.name in found:
                    raise ImportError(f"two prompt levers are named {value.name!r}: {found[value.name]} and {value}")
                found[value.name] = value
    return found


LEVERS: dict[str, type[PromptLever]] = _levers_in_package()
