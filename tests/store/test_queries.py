"""Named SQL blocks: both dialects define the same names, and every name the code uses exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import oncely.store
from oncely.store.queries import DIALECTS, queries

STORE_SOURCE = Path(oncely.store.__file__).parent
USE = re.compile(r"""_sql\[["']([a-z_0-9]+)["']\]""")


def test_both_dialects_define_the_same_names() -> None:
    assert set(queries("sqlite")) == set(queries("postgres"))


def test_every_name_the_code_uses_is_defined_in_every_dialect() -> None:
    used = {
        name for source in STORE_SOURCE.glob("*.py") for name in USE.findall(source.read_text())
    }
    assert used, "the pattern no longer finds the store's query uses"
    for dialect in DIALECTS:
        assert used <= set(queries(dialect)), dialect


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_block_has_sql(dialect: str) -> None:
    for name, text in queries(dialect).items():
        body = [line for line in text.splitlines() if line.strip() and not line.startswith("--")]
        assert body, f"{dialect}.sql block {name!r} is empty"
