"""The bake-off report: `report.md` and a self-contained `report.html` from a scoreboard.

The HTML page carries its CSS and an inline SVG chart — a hit-rate panel over a latency panel,
one row per configuration, each on an axis with a scale (0–100 %; round millisecond steps up
to the slowest p90) — and loads nothing, so it can be mailed or archived as is. It holds at
600 px wide: the chart is 540 units wide and scales down, the wide table scrolls in its box.
On a wide window the chart scales up with the text column, to at most 52rem (about 830 px at
1200 px), where its legend reads at the labels' size: at its natural 540 px it filled a third
of a 1200 px page in 11 px type.
Both files are derived: scoring again rewrites them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from html import escape
from pathlib import Path

from siftlib.bakeoff.rundir import write_private
from siftlib.bakeoff.score import ConfigScore, Scoreboard

RULE = (
    "Winner: among the configurations that ran every query, highest judged hit rate; ties "
    "broken by lower cost per query (Tavily credits plus Brave calls), then lower p90 latency."
)
NO_WINNER = "no configuration ran every query."
ALONE = "only one configuration ran, so nothing was compared."
# The chart's geometry in SVG units: labels, a bar panel, room for the value after a bar.
_LABEL_W, _PANEL_W, _RIGHT, _ROW_H = 160, 310, 70, 34
COLUMNS = (
    "configuration",
    "pack",
    "judged hit rate",
    "target hit rate",
    "Tavily credits / query",
    "Brave calls / query",
    "p50 latency",
    "p90 latency",
    "queries run",
    "skipped",
)


def _rate_cell(hits: int, total: int) -> str:
    # Keep the raw counts (6/8, not 3/4): the reader checks them against the sheet.
    return "n/a" if not total else f"{hits / total * 100:.1f}% ({hits}/{total})"


def _cost(value: Fraction | None) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def _ms(value: int | None) -> str:
    return "n/a" if value is None else f"{value} ms"


def row_cells(score: ConfigScore) -> list[str]:
    """Return one configuration's table cells, in `COLUMNS` order."""
    return [
        score.config,
        score.pack,
        _rate_cell(score.judged_hits, score.run),
        _rate_cell(score.target_hits, score.targeted),
        _cost(score.tavily_per_query),
        _cost(score.brave_per_query),
        _ms(score.p50_ms),
        _ms(score.p90_ms),
        str(score.run),
        str(score.skipped),
    ]


def _summary(board: Scoreboard) -> str:
    meta = board.meta
    open_part = "" if board.open_queries is None else f" ({board.open_queries} open)"
    return (
        f"date {meta.get('date', '?')} · k = {meta.get('k', '?')} · "
        f"{board.queries} queries{open_part} · sift {meta.get('sift_version', '?')}"
    )


def _notes(board: Scoreboard) -> list[str]:
    notes = [RULE]
    partial = [score.config for score in board.scores if score.skipped]
    if partial:
        notes.append(
            "Lines skipped at the --max-credits ceiling have no result: they are left out of "
            "every figure of their configuration, and a configuration with skipped lines is "
            f"not eligible to win ({', '.join(partial)}). Raise the ceiling and run again to "
            "compare all of them."
        )
    if board.open_queries is None:
        notes.append("The run directory holds no targets.txt: target hit rates are n/a.")
    return notes


def why_none(board: Scoreboard) -> str:
    """Say why a run has no winner: nobody complete, or nobody to compare with."""
    complete = [score for score in board.scores if score.eligible]
    return ALONE if complete and len(board.scores) < 2 else NO_WINNER


def render_markdown(board: Scoreboard) -> str:
    """Return report.md."""
    lines = ["# sift bake-off report", "", _summary(board), ""]
    lines.append(
        f"**Winner: `{board.winner}`**" if board.winner else f"**No winner**: {why_none(board)}"
    )
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for score in board.scores:
        lines.append("| " + " | ".join(row_cells(score)) + " |")
    if board.not_run:
        lines += ["", "Not run:", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in board.not_run.items()]
    lines += ["", *(f"{note}  " for note in _notes(board))]
    return "\n".join(lines).rstrip() + "\n"


@dataclass(frozen=True)
class _Bar:
    """One bar of a chart row: its value in axis units, its label, colour and thickness."""

    value: float | None
    label: str
    colour: str
    height: int


def nice_ticks(top: float, *, count: int = 4) -> list[float]:
    """Return 0 and round ticks (1, 2 or 5 × 10ⁿ apart), about `count` of them, reaching `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _panel(
    title: str,
    legend: list[tuple[str, str]],
    rows: list[tuple[str, bool, list[_Bar]]],
    ticks: list[float],
    unit: str,
    top: int,
) -> tuple[list[str], int]:
    """Draw one chart panel from `top`: title, legend, a row of bars per label, a scaled axis."""
    left, end = _LABEL_W, _LABEL_W + _PANEL_W
    legend_text = "  ".join(f'<tspan fill="{colour}">■ {name}</tspan>' for name, colour in legend)
    parts = [
        f'<text x="{left}" y="{top + 14}" font-weight="bold">{title}</text>',
        f'<text x="{end}" y="{top + 14}" text-anchor="end">{legend_text}</text>',
    ]
    rows_top = top + 26
    axis_y = rows_top + _ROW_H * len(rows)
    scale = ticks[-1]
    for tick in ticks:  # grid first, so the bars are drawn over it
        x = left + tick / scale * _PANEL_W
        parts += [
            f'<line x1="{x:.1f}" y1="{rows_top - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#e2e8f0"/>',
            f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 4}" stroke="#666"/>',
            f'<text x="{x:.1f}" y="{axis_y + 16}" font-size="11" text-anchor="middle">'
            f"{tick:g}{unit}</text>",
        ]
    parts += [
        f'<line x1="{left}" y1="{axis_y}" x2="{end}" y2="{axis_y}" stroke="#666"/>',
        f'<line x1="{left}" y1="{rows_top - 4}" x2="{left}" y2="{axis_y}" stroke="#666"/>',
    ]
    for i, (label, bold, bars) in enumerate(rows):
        y = rows_top + i * _ROW_H
        weight = ' font-weight="bold"' if bold else ""
        parts.append(f'<text x="{left - 8}" y="{y + 13}" text-anchor="end"{weight}>{label}</text>')
        by = y
        for bar in bars:
            w = 0.0 if bar.value is None else min(bar.value / scale, 1.0) * _PANEL_W
            parts.append(
                f'<rect x="{left}" y="{by}" width="{w:.1f}" height="{bar.height}" '
                f'fill="{bar.colour}"/>'
            )
            parts.append(
                f'<text x="{left + w + 4:.1f}" y="{by + bar.height - 1}" font-size="11">'
                f"{bar.label}</text>"
            )
            by += bar.height + 3
    return parts, axis_y + 24 - top


def chart_svg(scores: tuple[ConfigScore, ...], winner: str | None) -> str:
    """Return an SVG chart: hit rates, then p50/p90 latency, per configuration, on scaled axes.

    The panels are stacked, 540 units wide, so the chart holds in a 600 px wide window; CSS
    scales it to the text column's width (at most 52rem), down on anything narrower.
    """

    rate_rows = []
    latency_rows = []
    for score in scores:
        won = score.config == winner
        name = escape(score.config) + (" ★" if won else "")
        judged, target = score.judged_hit_rate, score.target_hit_rate
        rate_rows.append(
            (
                name,
                won,
                [
                    _Bar(_percent(judged), _pct(judged), "#2b6cb0", 14),
                    _Bar(_percent(target), _pct(target), "#63b3ed", 9),
                ],
            )
        )
        latency_rows.append(
            (
                name,
                won,
                [
                    _Bar(score.p50_ms, _ms(score.p50_ms), "#c05621", 14),
                    _Bar(score.p90_ms, _ms(score.p90_ms), "#f6ad55", 9),
                ],
            )
        )
    slowest = max((s.p90_ms or 0 for s in scores), default=0)
    rates, rates_h = _panel(
        "hit rate",
        [("judged", "#2b6cb0"), ("target", "#63b3ed")],
        rate_rows,
        [0, 25, 50, 75, 100],
        "%",
        0,
    )
    latency, latency_h = _panel(
        "latency",
        [("p50", "#c05621"), ("p90", "#f6ad55")],
        latency_rows,
        nice_ticks(slowest),
        " ms",
        rates_h + 12,
    )
    width, height = _LABEL_W + _PANEL_W + _RIGHT, rates_h + 12 + latency_h
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" '
            'font-size="13">',
            "<title>Hit rate and latency per configuration</title>",
            *rates,
            *latency,
            "</svg>",
        ]
    )


def _percent(rate: Fraction | None) -> float | None:
    return None if rate is None else float(rate) * 100


def _pct(rate: Fraction | None) -> str:
    return "n/a" if rate is None else f"{float(rate) * 100:.0f}%"


def render_html(board: Scoreboard) -> str:
    """Return report.html: self-contained, with the table and an inline SVG chart."""
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    body = "\n".join(
        f"<tr{' class=winner' if s.config == board.winner else ''}>"
        + "".join(f"<td>{escape(cell)}</td>" for cell in row_cells(s))
        + "</tr>"
        for s in board.scores
    )
    winner = (
        f"<p class=verdict>Winner: <code>{escape(board.winner)}</code></p>"
        if board.winner
        else f"<p class=verdict>No winner: {escape(why_none(board))}</p>"
    )
    not_run = ""
    if board.not_run:
        items = "".join(
            f"<li><code>{escape(n)}</code>: {escape(r)}</li>" for n, r in board.not_run.items()
        )
        not_run = f"<h2>Not run</h2><ul>{items}</ul>"
    notes = "".join(f"<p class=note>{escape(note)}</p>" for note in _notes(board))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sift bake-off report</title>
<style>
body {{ font-family: sans-serif; color: #222; }}
body {{ margin: 1.5em auto; padding: 0 1em; max-width: 60em; }}
svg {{ display: block; width: 100%; max-width: 52rem; height: auto; margin: 1em 0; }}
.table {{ overflow-x: auto; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
th {{ font-size: 0.9em; }}
th:first-child, td:first-child {{ text-align: left; }}
tr.winner td {{ background: #ebf8ff; font-weight: bold; }}
.verdict {{ font-size: 1.3em; }}
.note {{ color: #555; font-size: 0.9em; }}
</style>
</head>
<body>
<h1>sift bake-off report</h1>
<p>{escape(_summary(board))}</p>
{winner}
{chart_svg(board.scores, board.winner)}
<div class=table><table>
<tr>{head}</tr>
{body}
</table></div>
{not_run}
{notes}
</body>
</html>
"""


def write_reports(board: Scoreboard) -> tuple[Path, Path]:
    """Write report.md and report.html into the run directory; return their paths."""
    md, html = board.run_dir / "report.md", board.run_dir / "report.html"
    write_private(md, render_markdown(board))
    write_private(html, render_html(board))
    return md, html
