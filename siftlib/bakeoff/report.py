"""The bake-off report: `report.md` and a self-contained `report.html` from a scoreboard.

The HTML page carries its CSS and an inline SVG chart — hit rates on the left, latency on the
right, one row per configuration — and loads nothing, so it can be mailed or archived as is.
Both files are derived: scoring again rewrites them.
"""

from __future__ import annotations

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


def render_markdown(board: Scoreboard) -> str:
    """Return report.md."""
    lines = ["# sift bake-off report", "", _summary(board), ""]
    lines.append(f"**Winner: `{board.winner}`**" if board.winner else f"**No winner**: {NO_WINNER}")
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for score in board.scores:
        lines.append("| " + " | ".join(row_cells(score)) + " |")
    if board.not_run:
        lines += ["", "Not run:", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in board.not_run.items()]
    lines += ["", *(f"{note}  " for note in _notes(board))]
    return "\n".join(lines).rstrip() + "\n"


def chart_svg(scores: tuple[ConfigScore, ...], winner: str | None) -> str:
    """Return an SVG bar chart: hit rates (left) and p50/p90 latency (right) per configuration."""
    label_w, panel_w, gap, row_h, top = 190, 260, 70, 50, 48
    left, right = label_w, label_w + panel_w + gap
    width, height = right + panel_w + 80, top + row_h * len(scores) + 10
    slowest = max((s.p90_ms or 0 for s in scores), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="13">',
        "<title>Hit rate and latency per configuration</title>",
        f'<text x="{left}" y="18" font-weight="bold">hit rate</text>',
        f'<text x="{left}" y="34" font-size="11">'
        f'<tspan fill="#2b6cb0">■ judged</tspan>  <tspan fill="#63b3ed">■ target</tspan></text>',
        f'<text x="{right}" y="18" font-weight="bold">latency (ms)</text>',
        f'<text x="{right}" y="34" font-size="11">'
        f'<tspan fill="#c05621">■ p50</tspan>  <tspan fill="#f6ad55">■ p90</tspan></text>',
        f'<line x1="{left}" y1="{top - 6}" x2="{left}" y2="{height - 6}" stroke="#999"/>',
        f'<line x1="{right}" y1="{top - 6}" x2="{right}" y2="{height - 6}" stroke="#999"/>',
    ]
    for i, score in enumerate(scores):
        y = top + i * row_h
        name = escape(score.config) + (" ★" if score.config == winner else "")
        weight = ' font-weight="bold"' if score.config == winner else ""
        parts.append(f'<text x="{left - 10}" y="{y + 18}" text-anchor="end"{weight}>{name}</text>')
        bars = [
            (left, y, 16, score.judged_hit_rate, "#2b6cb0", panel_w),
            (left, y + 20, 10, score.target_hit_rate, "#63b3ed", panel_w),
        ]
        for x, by, h, rate, colour, span in bars:
            w = 0.0 if rate is None else float(rate) * span
            value = "n/a" if rate is None else f"{float(rate) * 100:.0f}%"
            parts.append(f'<rect x="{x}" y="{by}" width="{w:.1f}" height="{h}" fill="{colour}"/>')
            parts.append(
                f'<text x="{x + w + 4:.1f}" y="{by + h - 2}" font-size="11">{value}</text>'
            )
        for by, h, ms, colour in (
            (y, 16, score.p50_ms, "#c05621"),
            (y + 20, 10, score.p90_ms, "#f6ad55"),
        ):
            w = 0.0 if ms is None else ms / slowest * panel_w
            value = "n/a" if ms is None else str(ms)
            parts.append(
                f'<rect x="{right}" y="{by}" width="{w:.1f}" height="{h}" fill="{colour}"/>'
            )
            parts.append(
                f'<text x="{right + w + 4:.1f}" y="{by + h - 2}" font-size="11">{value}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


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
        else f"<p class=verdict>No winner: {escape(NO_WINNER)}</p>"
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
<title>sift bake-off report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
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
<table>
<tr>{head}</tr>
{body}
</table>
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
