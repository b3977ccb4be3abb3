"""ONC001: a file Python would not read or parse (reported by the engine; the run goes on)."""

from __future__ import annotations

from oncely.lint.rules.base import Rule


class SyntaxErrorInFile(Rule):
    """## What it does
    Reports a Python file that Python would refuse, at the place it stopped: a syntax error,
    bytes that are not in the file's encoding (UTF-8 unless a coding cookie says otherwise), a
    null byte, or nesting too deep for the parser. Errors only the compiler raises, such as
    ``return`` outside a function, are not this rule's: the file parses and every rule checks it.

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
