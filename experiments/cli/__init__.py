"""The command line: thin entry points over the harness, the predictor and the report."""
