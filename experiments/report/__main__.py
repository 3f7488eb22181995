import sys

from experiments.report.cli import main

sys.exit(main())
