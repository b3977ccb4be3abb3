"""Draw the lag chart of ``docs/performance.md``: p50/p90/p99 per scheduler, a panel per workload.

``bench/report.py`` runs it in ``.venv-bench``, where matplotlib is installed (a bench-only
dependency, ``bench/requirements-peers.txt``)::

    .venv-bench/bin/python bench/_lag_chart.py CHART.json OUT.png

``CHART.json``: ``{"title": str, "panels": [{"title": str, "rows": [{"label": str,
"p50_ms": float | null, "p90_ms": ..., "p99_ms": ...}, ...]}, ...]}``. Bars are drawn on a
logarithmic axis (lags here range from milliseconds to seconds), each labelled with its value;
a missing percentile (nothing ran) is left out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: write the file only

import matplotlib.pyplot as plt

PERCENTILES = (
    ("p50_ms", "p50", "#9ecae1"),
    ("p90_ms", "p90", "#4292c6"),
    ("p99_ms", "p99", "#08519c"),
)
BAR = 0.26


def draw(chart: dict[str, Any], out: Path) -> None:
    """Write the chart described by ``chart`` (see the module docstring) to ``out`` as PNG."""
    panels = chart["panels"]
    heights = [max(len(panel["rows"]), 1) * 0.9 + 1.2 for panel in panels]
    figure, axes = plt.subplots(
        len(panels), 1, figsize=(9, sum(heights)), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for axis, panel in zip(axes[:, 0], panels, strict=True):
        rows = list(reversed(panel["rows"]))  # first row on top
        for k, (field, name, colour) in enumerate(PERCENTILES):
            positions = [n + (1 - k) * BAR for n in range(len(rows))]
            values = [row.get(field) for row in rows]
            shown = [(y, v) for y, v in zip(positions, values, strict=True) if v]
            if not shown:
                continue
            bars = axis.barh(
                [y for y, _ in shown], [v for _, v in shown], height=BAR, color=colour, label=name
            )
            labels = [f"{v:,.0f}" if v >= 10 else f"{v:.1f}" for _, v in shown]
            axis.bar_label(bars, labels=labels, padding=2, fontsize=7)
        for n, row in enumerate(rows):
            if not any(row.get(field) for field, _, _ in PERCENTILES):
                # An empty row read as a figure too small to draw, not as nothing having run.
                note = f"ran {row.get('ran', 0):,.0f} of {row.get('due', 0):,.0f} in the window"
                axis.text(
                    0.01, n, note, transform=axis.get_yaxis_transform(), fontsize=7, va="center"
                )
        axis.set_yticks(range(len(rows)), [row["label"] for row in rows], fontsize=8)
        axis.set_ylim(-0.6, len(rows) - 0.4)
        axis.set_xscale("log")
        axis.set_xlabel("lag, ms (log scale): handler start - due time", fontsize=8)
        axis.set_title(panel["title"], fontsize=9, loc="left")
        axis.grid(axis="x", which="major", alpha=0.3)
        axis.margins(x=0.15)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=8, loc="upper right", ncols=3)
    figure.suptitle(chart["title"], fontsize=10, x=0.02, ha="left")
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main(argv: list[str]) -> int:
    source, out = argv
    draw(json.loads(Path(source).read_text()), Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
