"""`python -m experiments.report`: the report's command (experiments/cli/report.py)."""

import sys

from experiments.cli.report import main

sys.exit(main())
