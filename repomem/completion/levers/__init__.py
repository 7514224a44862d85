"""Prompt levers: each way repomem changes what the model is shown, one module each.

The strategy table (repomem.strategies) lists, per strategy, the levers it uses, by name; the
engine runs them at its stages through the hooks of `levers.base.PromptLever` and names none of
them. A lever's settings switch it on or off (`PromptLever.applies`).

Adding a lever is one module here holding a `PromptLever` subclass with a `name` (LEVERS finds
it) and its name in the strategies that should use it (docs/extending.md walks through one). A
lever reads the repository through the round's `RepoView` (never the service), and its own
queries of the code graph live in its module, on the view's read-only symbol handle. A lever that
must run after another says so (`PromptLever.after`); loading the levers checks every strategy's
order against those declarations.
"""

from __future__ import annotations

import importlib
import pkgutil

from repomem.completion.levers.base import PromptLever
from repomem.strategies import STRATEGY_TABLE, Strategy


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


def order_problems(levers: dict[str, type[PromptLever]], strategies: tuple[Strategy, ...]) -> list[str]:
    """Each strategy that lists a lever it does not know, or a lever before one it must run after."""
    problems = []
    for strategy in strategies:
        place = {name: position for position, name in enumerate(strategy.levers)}
        for name in strategy.levers:
            lever = levers.get(name)
            if lever is None:
                problems.append(f"strategy {strategy.name!r} lists an unknown prompt lever {name!r}")
                continue
            late = [first for first in lever.after if place.get(first, -1) > place[name]]
            if late:
                problems.append(f"strategy {strategy.name!r} runs {name!r} before {', '.join(map(repr, late))}, "
                                f"which it must run after")
    return problems


_problems = order_problems(LEVERS, STRATEGY_TABLE)
if _problems:
    raise ImportError("; ".join(_problems))
