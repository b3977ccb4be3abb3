"""How findings are shown: text, JSON, SARIF 2.1.0; and the rules' pages for docs/lint/.

Text is ``path:line:col: CODE message (see <the rule's page>)``, one finding a line. JSON is a
list of objects with those five keys and ``level``. SARIF is one run of the ``oncely`` tool whose
``rules`` are the rules that ran, each with its page as ``helpUri``; each result an ``error`` (or
a ``note``) at a path relative to the config root (``%SRCROOT%``), for code-scanning services
(GitHub's among them) to annotate. Suppressed findings are results too, with the suppression's
reason as ``suppressions[].justification``, as those services show them. Columns are the
engine's: 1-based, counted in bytes of the line's UTF-8 text.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from oncely.lint.finding import NOTE, Finding
from oncely.lint.rules import Rule
from oncely.version import oncely_version

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
#: The base of every relative artifact URI in a SARIF log: the config root.
SOURCE_ROOT = "%SRCROOT%"
_SECTION = re.compile(r"^## (?P<title>.+)$", re.MULTILINE)


def rule_url(code: str, docs_url: str | None) -> str | None:
    """The published page of rule ``code`` (docs/lint/<CODE>.md) under the configured
    ``docs-url``; None when no site is configured."""
    return None if docs_url is None else f"{docs_url}lint/{code}/"


def rule_pointer(code: str, docs_url: str | None) -> str:
    """Where a person reads rule ``code``: its published page, or the command that prints it."""
    return rule_url(code, docs_url) or f"oncely lint --explain {code}"


#: The codes the engine reports about suppressions and unreadable files: their messages say
#: what to do, and suppressing them is no answer.
_ENGINE_CODES = frozenset({"ONC000", "ONC001", "ONC002"})


def text_report(findings: Sequence[Finding], docs_url: str | None = None) -> str:
    """One line per finding ('' when none): ``path:line:col: CODE message``, then, for a
    rule's finding, how to suppress it with a reason, and last the rule's page."""
    return "".join(
        f"{f.path}:{f.line}:{f.col}: {f.code} {'note: ' if f.level == NOTE else ''}{f.message}"
        + (
            ""
            if f.code in _ENGINE_CODES
            else f"; if this is the one exception, write '# oncely: allow {f.code} -- why' here"
        )
        + f" (see {rule_pointer(f.code, docs_url)})\n"
        for f in findings
    )


def summary(findings: Sequence[Finding]) -> str:
    """What the text report writes to standard error: how many findings and notes."""
    notes = sum(f.level == NOTE for f in findings)
    parts = [f"{len(findings) - notes} finding(s)"] if len(findings) > notes else []
    parts += [f"{notes} note(s): not failing the run"] if notes else []
    return ", ".join(parts) + "\n" if parts else ""


def json_report(findings: Sequence[Finding]) -> str:
    """A JSON list of ``{"path", "line", "col", "code", "message", "level"}`` objects."""
    return json.dumps(
        [
            {
                "path": f.path,
                "line": f.line,
                "col": f.col,
                "code": f.code,
                "message": f.message,
                "level": f.level,
            }
            for f in findings
        ],
        indent=2,
    )


def sarif_report(
    findings: Sequence[Finding],
    rules: Sequence[type[Rule]],
    root: Path,
    docs_url: str | None = None,
) -> str:
    """`sarif_log` as JSON text."""
    return json.dumps(sarif_log(findings, rules, root, docs_url), indent=2)


def sarif_log(
    findings: Sequence[Finding],
    rules: Sequence[type[Rule]],
    root: Path,
    docs_url: str | None = None,
) -> dict[str, Any]:
    """A SARIF 2.1.0 log of one run: ``rules`` describe what ran, ``findings`` are its results.

    A finding's path relative to ``root`` (the config root) becomes a URI relative to
    ``%SRCROOT%``; an absolute one (a file outside the root) becomes a ``file:`` URI.
    """
    index = {rule.code: position for position, rule in enumerate(rules)}
    results = []
    for finding in findings:
        result: dict[str, Any] = {"ruleId": finding.code}
        if finding.code in index:
            result["ruleIndex"] = index[finding.code]
        result |= {
            "level": finding.level,
            "message": {"text": finding.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact(finding.path),
                        "region": {"startLine": finding.line, "startColumn": finding.col},
                    }
                }
            ],
        }
        if finding.justification is not None:
            suppression: dict[str, str] = {"kind": "inSource"}
            if finding.justification:
                suppression["justification"] = finding.justification
            result["suppressions"] = [suppression]
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "oncely",
                        "version": oncely_version(),
                        "rules": [_descriptor(rule, docs_url) for rule in rules],
                    }
                },
                "originalUriBaseIds": {SOURCE_ROOT: {"uri": root.resolve().as_uri() + "/"}},
                "results": results,
            }
        ],
    }


def _artifact(path: str) -> dict[str, str]:
    posix = PurePosixPath(path)
    if posix.is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(posix.as_posix()), "uriBaseId": SOURCE_ROOT}


def _descriptor(rule: type[Rule], docs_url: str | None) -> dict[str, Any]:
    """The rule's SARIF descriptor: its whole documentation in ``help``, and its published
    page as ``helpUri`` where ``docs-url`` says where the site is (an address of a site that
    does not exist is worse than none)."""
    documentation = rule_documentation(rule)
    descriptor: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.message},
        "fullDescription": {"text": _plain(section(rule, "What it does"))},
        "help": {"text": documentation, "markdown": documentation},
        "defaultConfiguration": {"level": "error"},
    }
    url = rule_url(rule.code, docs_url)
    if url is not None:
        descriptor["helpUri"] = url
    return descriptor


def rule_documentation(rule: type[Rule]) -> str:
    """The rule's docstring, dedented: What it does / Why is this bad? / Example / Use instead."""
    return inspect.cleandoc(rule.__doc__ or "")


def section(rule: type[Rule], title: str) -> str:
    """The text of the ``## <title>`` section of the rule's documentation ('' when absent)."""
    documentation = rule_documentation(rule)
    headings = list(_SECTION.finditer(documentation))
    for position, heading in enumerate(headings):
        if heading["title"].strip() == title:
            end = headings[position + 1].start() if position + 1 < len(headings) else None
            return documentation[heading.end() : end].strip()
    return ""


def rule_page(rule: type[Rule]) -> str:
    """The Markdown page of one rule, ``docs/lint/<CODE>.md``, written from its docstring.

    A test keeps the pages under docs/lint/ equal to this; see `rule_reference` for the table.
    """
    return (
        f"# {rule.code} {rule.name}\n\n"
        f"Message: `{rule.message}`\n\n"
        f"{rule_documentation(rule)}\n\n"
        "---\n\n"
        "This page is written from the rule's docstring. Configuration, suppressions and\n"
        "`--prove` are described in [oncely lint](../lint.md).\n"
    )


def rule_reference(rules: Sequence[type[Rule]]) -> str:
    """A Markdown table of ``rules``: code (linking to its page under lint/), name, message.

    docs/lint.md holds this between its ``<!-- rules -->`` markers; a test keeps them equal.
    """
    rows = [
        f"| [{rule.code}](lint/{rule.code}.md) | {rule.name} | {rule.message} |\n" for rule in rules
    ]
    return "| code | name | message |\n|---|---|---|\n" + "".join(rows)


def _plain(markdown: str) -> str:
    return " ".join(markdown.replace("``", "").replace("`", "").split())
