"""The rules: one module per rule, ``onc<NNN>_<what_it_forbids>.py``, discovered, not registered.

`all_rules()` imports every such module and returns its one `Rule` subclass, ordered by code.
A test checks the set is complete: the code in each file name matches its class, codes are
unique, every rule has examples and documentation.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache

from oncely.lint.rules.base import Context, Rule

RULE_MODULE = re.compile(r"onc(\d{3})_[a-z0-9_]+")


@cache
def _rule_modules() -> tuple[str, ...]:
    return tuple(
        sorted(m.name for m in pkgutil.iter_modules(__path__) if RULE_MODULE.fullmatch(m.name))
    )


def rule_codes() -> tuple[str, ...]:
    """Every rule's code, ordered, read from its module's name: the rules are not imported."""
    return tuple(f"ONC{name[3:6]}" for name in _rule_modules())


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for name in _rule_modules():
        loaded = importlib.import_module(f"{__name__}.{name}")
        rules = [
            value
            for value in vars(loaded).values()
            if isinstance(value, type)
            and issubclass(value, Rule)
            and value is not Rule
            and value.__module__ == loaded.__name__
        ]
        if len(rules) != 1:
            raise RuntimeError(f"{loaded.__name__} defines {len(rules)} rules; one per file")
        found.append(rules[0])
    return tuple(sorted(found, key=lambda rule: rule.code))


__all__ = ["Context", "Rule", "all_rules", "rule_codes"]
