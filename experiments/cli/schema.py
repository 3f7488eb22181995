"""python -m experiments.cli.schema: write docs/records.schema.json, the records' JSON
schema generated from their models (experiments.records.schema), and the column
dictionary of the report's table in docs/usage.md (experiments.report.figures)."""

from pathlib import Path

from experiments import records
from experiments.report import figures, readme

USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"
COLUMNS_START, COLUMNS_END = "<!-- columns:start -->", "<!-- columns:end -->"


def rewrite_column_dictionary(path: Path = USAGE) -> None:
    text = readme.replace_block(
        path.read_text(encoding="utf-8"), figures.column_dictionary(), COLUMNS_START, COLUMNS_END
    )
    records.write_whole(path, text.encode("utf-8"))


if __name__ == "__main__":
    records.write_whole(records.SCHEMA_FILE, records.schema_text().encode())
    rewrite_column_dictionary()
    print(f"{records.SCHEMA_FILE} and the column dictionary in {USAGE} written")
