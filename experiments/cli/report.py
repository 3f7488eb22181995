"""python -m experiments.report RESULTS... [--out DIR] [--readme README.md]
[--performance PERFORMANCE.md]: records -> the table of figures (figures.csv)
-> REPORT.md, its pages and plots, and the README's and PERFORMANCE.md's generated
blocks, each a view of that table.

The pages and plots are written into a temporary folder and swapped in with one
rename, then figures.csv and REPORT.md, each whole: a full disk leaves the old report
or the new one, never pages of both.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from experiments import records as records_lib
from experiments.cli.options import OneLineParser
from experiments.records.tables import one_line_warning
from experiments.report import figures, plots, views
from experiments.report import readme as analysis

BENCH_START, BENCH_END = "<!-- bench:start -->", "<!-- bench:end -->"
# The generated blocks of --readme and --performance: their markers, and what goes there.
BLOCKS = (
    (analysis.README_START, analysis.README_END, "results table"),
    (BENCH_START, BENCH_END, "bench table"),
)


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def is_smoke(record: dict) -> bool:
    return bool(record["workload"].get("smoke"))


def write_report(table, out: Path) -> tuple[Path, int]:
    """report/ (pages, plots), figures.csv with its schema, and REPORT.md into `out`;
    returns (REPORT.md, how many plots)."""
    pages = out / views.PAGES
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    try:
        drawn = plots.draw(table, staging)
        for name in views.PAGE_SECTIONS:
            _write_text(staging / f"{name}.md", views.page(name, table, drawn))
        old = out / f".report-old-{os.getpid()}"
        if pages.exists():
            pages.rename(old)
        staging.rename(pages)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    records_lib.write_whole(
        out / views.FIGURES, table.to_csv(index=False, lineterminator="\n").encode("utf-8")
    )
    schema = json.dumps(figures.table_schema(), indent=1) + "\n"
    records_lib.write_whole(out / views.FIGURES_SCHEMA, schema.encode("utf-8"))
    first = drawn.get("first")
    report = out / views.REPORT_FILE
    _write_text(report, views.first_screen(table, views.PAGES, first and f"{views.PAGES}/{first}"))
    return report, len(drawn)


def _write_text(path: Path, text: str) -> None:
    records_lib.write_whole(path, (text.rstrip("\n") + "\n").encode("utf-8"))


def _link(target: Path, notes: Path) -> str:
    return Path(os.path.relpath(target, notes.resolve().parent)).as_posix()


def rewrite_block(notes: Path, block: str, start: str, end: str) -> None:
    """Rewrite the notes' generated block; the rest stays byte-identical."""
    text = notes.read_bytes().decode("utf-8")
    records_lib.write_whole(notes, analysis.replace_block(text, block, start, end).encode("utf-8"))


def _has_markers(notes: Path, start: str, end: str) -> bool:
    try:
        analysis.replace_block(notes.read_bytes().decode("utf-8"), "", start, end)
    except analysis.MissingMarkers:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = one_line_warning  # a skipped bad record: one line
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    p = OneLineParser(prog="python -m experiments.report", description=__doc__)
    p.add_argument("paths", nargs="+", help="records.jsonl files or folders of them")
    p.add_argument("--out", help="folder for REPORT.md and report/ (default: the first folder)")
    p.add_argument("--readme", help="also rewrite the answers block of this file")
    p.add_argument("--performance", help="also rewrite the bench block of this file")
    p.add_argument("--include-smoke", action="store_true", help="also report --smoke runs' records")
    args = p.parse_args(argv)
    missing = [x for x in args.paths if not Path(x).exists()]
    missing += [x for x in (args.readme, args.performance) if x and not Path(x).is_file()]
    if missing:
        return _error(f"no such file or folder: {', '.join(missing)}")
    try:  # a FIFO would block the load forever, /dev/zero fill the memory
        records_lib.records_files(args.paths)
    except OSError as e:
        return _error(f"cannot read records from {e.filename}: {e.strerror}")
    for given, (start, end, what) in zip((args.readme, args.performance), BLOCKS, strict=True):
        if given and not _has_markers(Path(given), start, end):
            return _error(
                f"{given} has no generated block: add a line {start} and, below it, "
                f"a line {end} where the {what} goes"
            )
    first = Path(args.paths[0])
    out = Path(args.out) if args.out else (first if first.is_dir() else first.parent)
    try:
        records_lib.check_writable_folder(out)
    except OSError as e:
        return _error(f"cannot write to --out {out}: {e.strerror or e}")
    from experiments.predict import references
    from jaxcnn.errors import DataError

    try:
        refs = references.load()
    except DataError as e:
        return _error(str(e))
    loaded = records_lib.load(*args.paths)
    if not loaded:
        return _error(f"no records found in {', '.join(args.paths)}")
    kept = [r for r in loaded if args.include_smoke or not is_smoke(r)] or loaded
    table = figures.build(kept, refs)
    try:
        report, n_plots = write_report(table, out)
        if args.readme:
            readme = Path(args.readme)
            rewrite_block(
                readme,
                views.readme_block(table, _link(report, readme)),
                analysis.README_START,
                analysis.README_END,
            )
        if args.performance:
            notes = Path(args.performance)
            bench_plot = out / views.PAGES / "bench.png"
            image = _link(bench_plot, notes) if bench_plot.exists() else None
            rewrite_block(notes, views.bench_block(table, image), BENCH_START, BENCH_END)
    except OSError as e:  # a full disk: each file is whole, the old one or the new
        print(
            f"error: could not write {e.filename or out} ({e.strerror or e}); "
            "the report is as it was",
            file=sys.stderr,
        )
        return 1
    left = len(loaded) - len(kept)
    smoke = f"; {left} --smoke record(s) left out: --include-smoke reports them" if left else ""
    print(f"{report} ({len(kept)} records, {len(table)} figures, {n_plots} plots{smoke})")
    return 0
