"""ONC001: a file that does not parse (reported by the engine; the run goes on)."""

from __future__ import annotations

from oncely.lint.rules.base import Rule


class SyntaxErrorInFile(Rule):
    """## What it does
    Reports a Python file that does not parse, at the place the parser stopped.

    ## Why is this bad?
    No rule can check a file that does not parse: every other rule is silent on it. Saying so
    keeps a broken file from passing as a clean one, and the rest of the run goes on.

    ## Example
    ```python
    def broken(:
        ...
    ```

    ## Use instead
    ```python
    def fixed():
        ...
    ```
    """

    code = "ONC001"
    name = "syntax-error"
    message = "syntax error, file not checked"
    violating = "def broken(:\n    pass\n"
    clean = "def fixed():\n    pass\n"
