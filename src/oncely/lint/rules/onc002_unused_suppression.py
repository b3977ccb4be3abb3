"""ONC002: a suppression that silences nothing on its line (reported by the engine)."""

from __future__ import annotations

from oncely.lint.rules.base import Rule


class UnusedSuppression(Rule):
    """## What it does
    Finds ``# oncely: allow CODE -- reason`` comments naming a code whose rule ran and did not
    fire on that line: the code was fixed, moved or never fired there. A code whose rule did
    not run (not selected, ignored, or needing options it lacks) is not judged; a suppression
    naming no code or an unknown code is ONC000's.

    ## Why is this bad?
    A stale suppression reads as a justified exception that no longer exists, and it silences
    the next violation written on that line without anyone deciding so. Suppressions that
    cannot go stale stay worth reading.

    ## Example
    ```python
    import time

    time.sleep(1)  # oncely: allow ONC101 -- the vendor SDK's reconnect loop
    ```

    ## Use instead
    ```python
    import time

    time.sleep(1)
    ```
    """

    code = "ONC002"
    name = "unused-suppression"
    message = "unused suppression"
    companions = ("ONC101",)
    violating = "import time\n\ntime.sleep(1)  # oncely: allow ONC101 -- the SDK's reconnect loop\n"
    clean = "import time\n\ntime.sleep(1)\n"
