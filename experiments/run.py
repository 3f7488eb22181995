"""`python -m experiments.run`: the study's command (experiments/cli/run.py)."""

import os
import sys

from experiments.cli.run import main

if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
