"""python -m experiments.report RESULTS... [--out DIR] [--readme README.md]
[--performance PERFORMANCE.md]: records -> the table of figures (figures.csv)
-> REPORT.md, its pages and plots, and the README's and PERFORMANCE.md's generated
blocks, each a view of that table.

The pages and plots are written into a temporary folder, figures.csv, REPORT.md and
the blocks' files into temporary files beside theirs, each whole, and then all renamed
in together: a full disk leaves the old report or the new one, never files of both.
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
from experiments.report import answers as answers_lib
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


def is_smoke(record: records_lib.Record) -> bool:
    """Made by a --smoke run (its environment says so: records.environment)."""
    return bool(record.env.smoke)


def write_report(
    table, out: Path, readme: Path | None = None, performance: Path | None = None
) -> tuple[Path, int]:
    """report/ (pages, plots), figures.csv and REPORT.md into `out`, and the generated
    blocks of `readme` and `performance`, all together: each written whole beside where
    it goes, then all renamed in (records.replace_together), so a full disk leaves the
    old report, every file of it; (REPORT.md, plots)."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    moves: list[tuple[Path, Path]] = []
    try:
        drawn = plots.draw(table, staging)
        answered = answers_lib.answers(table)
        for name in views.PAGE_SECTIONS:
            _write_text(staging / f"{name}.md", views.page(name, table, drawn, answered))
        moves.append((staging, out / views.PAGES))
        first = drawn.get("first")
        report = out / views.REPORT_FILE
        texts = {
            # ten significant digits: a figure reads the same whichever numpy computed it
            out / views.FIGURES: table.to_csv(
                index=False, lineterminator="\n", float_format="%.10g"
            ),
            out / views.FIGURES_SCHEMA: json.dumps(figures.table_schema(), indent=1) + "\n",
            report: _ending(
                views.first_screen(table, views.PAGES, first and f"{views.PAGES}/{first}")
            ),
        }
        if readme:
            block = views.readme_block(table, _link(report, readme))
            texts[readme] = _with_block(readme, block, analysis.README_START, analysis.README_END)
        if performance:
            bench_plot = out / views.PAGES / "bench.png"
            image = _link(bench_plot, performance) if (staging / bench_plot.name).exists() else None
            block = views.bench_block(table, image)
            texts[performance] = _with_block(performance, block, BENCH_START, BENCH_END)
        for path, text in texts.items():
            real = Path(os.path.realpath(path))  # a link followed, its target replaced
            moves.append((records_lib.staged(real, text.encode("utf-8")), real))
        records_lib.replace_together(moves)
    finally:  # what was not renamed in
        shutil.rmtree(staging, ignore_errors=True)
        for staged, _ in moves[1:]:
            staged.unlink(missing_ok=True)
    return report, len(drawn)


def _write_text(path: Path, text: str) -> None:
    records_lib.write_whole(path, _ending(text).encode("utf-8"))


def _ending(text: str) -> str:
    return text.rstrip("\n") + "\n"


def _link(target: Path, notes: Path) -> str:
    return Path(os.path.relpath(target, notes.resolve().parent)).as_posix()


def _with_block(notes: Path, block: str, start: str, end: str) -> str:
    """The notes with their generated block replaced; the rest byte-identical."""
    return analysis.replace_block(notes.read_bytes().decode("utf-8"), block, start, end)


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
    p.add_path("paths", nargs="+", help="records.jsonl files or folders of them")
    p.add_path(
        "--out", what="folder", help="folder for REPORT.md and report/ (default: the first folder)"
    )
    p.add_path("--readme", what="file", help="also rewrite the answers block of this file")
    p.add_path("--performance", what="file", help="also rewrite the bench block of this file")
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
    from jaxcnn.perf import predict

    try:  # what the table is priced with: a bad file is its one line, not a traceback
        refs = references.load()
        predict.constants()
    except (DataError, predict.ConstantsError) as e:
        return _error(str(e))
    loaded = records_lib.load(*args.paths)
    if not loaded:
        return _error(f"no records found in {', '.join(args.paths)}")
    kept = [r for r in loaded if args.include_smoke or not is_smoke(r)] or loaded
    table = figures.build(kept, refs)
    readme = Path(args.readme) if args.readme else None
    performance = Path(args.performance) if args.performance else None
    try:
        report, n_plots = write_report(table, out, readme, performance)
    except OSError as e:  # a full disk: nothing was renamed in, the old report stands
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
