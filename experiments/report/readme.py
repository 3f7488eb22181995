"""The README's generated block: its markers, and rewriting what lies between them."""

from __future__ import annotations

README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"


class MissingMarkers(ValueError):
    """The README lacks the start/end markers of the generated block."""


def replace_block(text: str, block: str, start: str = README_START, end: str = README_END) -> str:
    """`text` with what lies between `start` and `end` replaced by `block` on its own
    lines; everything outside the markers, the markers included, is kept as it is."""
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise MissingMarkers(f"needs one {start} line followed by one {end} line")
    head = text[: text.index(start) + len(start)]
    tail = text[text.index(end) :]
    newline = "\r\n" if "\r\n" in text else "\n"
    body = newline.join(block.strip("\n").splitlines())
    return f"{head}{newline}{body}{newline}{tail}"
