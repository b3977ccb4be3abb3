"""ONC000: a suppression comment without a written reason or a known code (engine-reported)."""

from __future__ import annotations

from oncely.lint.rules.base import Rule


class SuppressionWithoutReason(Rule):
    """## What it does
    Finds ``# oncely: allow CODE`` comments that give no reason after ``--``, name no code, or
    name a code no rule has. Codes are separated by commas or spaces, in either case; an en or
    em dash may stand for ``--``. A reason needs a letter or a digit, and ends where another
    comment (``# type: ignore``) begins.

    ## Why is this bad?
    A suppression is a claim that this line is the one justified exception. Without the reason
    nobody can check the claim, and suppressions spread until the rule means nothing.

    ## Example
    ```python
    while True:  # oncely: allow ONC101
        ...
    ```

    ## Use instead
    ```python
    while True:  # oncely: allow ONC101 -- the vendor SDK's own reconnect loop, see INC-42
        ...
    ```
    """

    code = "ONC000"
    name = "suppression-without-reason"
    message = "suppression without a reason"
    violating = "import time\n\ntime.sleep(1)  # oncely: allow ONC101\n"
    clean = "import time\n\ntime.sleep(1)  # oncely: allow ONC101 -- one-shot start-up delay\n"
