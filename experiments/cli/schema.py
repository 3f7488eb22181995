"""python -m experiments.cli.schema: write docs/records.schema.json, the records' JSON
schema, and the field tables of docs/records.md, both generated from their models
(experiments.records.schema), and the column dictionary of the report's table in
docs/usage.md (experiments.report.figures)."""

import sys
from pathlib import Path

from experiments import records
from experiments.cli.options import OneLineParser
from experiments.report import figures, readme

USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"
COLUMNS_START, COLUMNS_END = "<!-- columns:start -->", "<!-- columns:end -->"


def rewrite_column_dictionary(path: Path = USAGE) -> None:
    text = readme.replace_block(
        path.read_text(encoding="utf-8"), figures.column_dictionary(), COLUMNS_START, COLUMNS_END
    )
    records.write_whole(path, text.encode("utf-8"))


def fields_page(text: str) -> str:
    """docs/records.md's `text` with its field tables as the models make them."""
    return readme.replace_block(
        text, records.fields_text(), records.FIELDS_START, records.FIELDS_END
    )


def rewrite_fields_page(path: Path = records.FIELDS_PAGE) -> None:
    records.write_whole(path, fields_page(path.read_text(encoding="utf-8")).encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.cli.schema", description=__doc__)
    parser.parse_args(argv)  # no options: --help shows this, anything else is refused
    records.write_whole(records.SCHEMA_FILE, records.schema_text().encode())
    rewrite_fields_page()
    rewrite_column_dictionary()
    print(
        f"{records.SCHEMA_FILE}, the field tables in {records.FIELDS_PAGE} and the column "
        f"dictionary in {USAGE} written"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
