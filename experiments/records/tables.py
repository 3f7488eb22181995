"""Plain-text and Markdown tables, for the CLI's summary and the report."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    markdown: bool = False,
    left: int = 1,
) -> str:
    """Rows under their headers; as plain text, the first `left` columns (names)
    left-aligned and the rest (numbers) right-aligned."""
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    if markdown:  # a cell may hold a record's string: a model, a host, a message
        cells = [[markdown_text(c) for c in row] for row in cells]
        lines = ["| " + " | ".join(row) + " |" for row in cells]
        lines.insert(1, "|" + "|".join("---" for _ in headers) + "|")
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# What a string from a record must not carry into Markdown: a line break (a new line
# could start a heading or end a table), a pipe not yet escaped (a table's cell
# separator), and the start of an HTML tag (nothing from a record is emitted as HTML).
_LINE_BREAK = re.compile(r"[\r\n]+")
_PIPE = re.compile(r"(?<!\\)\|")
_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def markdown_text(text: object) -> str:
    """`text` from a record (a model, a host, a message) made safe in a Markdown table
    cell, heading or sentence: one line, its pipes escaped, no HTML tag. Rendered, it
    reads as the record says; text without those characters (every figure the report
    makes, `<= 8`, `>= 16`) is unchanged, and so is text already made safe."""
    return _TAG.sub("&lt;", _PIPE.sub(r"\|", _LINE_BREAK.sub(" ", str(text))))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    return format_table(headers, rows, markdown=True)


def si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """1.23e9 -> '1.23 G'; None -> '-'."""
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1:
        return f"{value:.3g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} us"


def one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """For warnings.showwarning in the CLIs: a warning (a skipped bad record, a corrupt
    checkpoint) as one line, without the source line Python adds."""
    print(f"warning: {message}", file=file or sys.stderr)
