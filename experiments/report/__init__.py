"""The report: records -> one table of figures (figures.py) -> the pages, the README
block and the plots, each a view of that table (views.py, plots.py). Its command is
experiments/cli/report.py:

    python -m experiments.report results/ [--readme README.md] [--performance PERFORMANCE.md]
"""
