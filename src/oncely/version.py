"""Which oncely this is: for SARIF output, the lint cache and the workers' heartbeats."""

from __future__ import annotations


def oncely_version() -> str:
    """The installed oncely's version ('unknown' when run from a source tree not installed)."""
    from importlib import metadata  # tens of milliseconds: only the callers that need it pay

    try:
        return metadata.version("oncely")
    except metadata.PackageNotFoundError:
        return "unknown"
