"""The report: records -> one table of figures (figures.py) -> the pages, the README
block and the plots, each a view of that table (views.py, plots.py).

    python -m experiments.report results/ [--readme README.md] [--performance PERFORMANCE.md]
"""


def main(argv: list[str] | None = None) -> int:
    """The command line (experiments/report/cli.py), imported when called: importing the
    package starts neither pandas nor JAX."""
    from experiments.report.cli import main as cli_main

    return cli_main(argv)
