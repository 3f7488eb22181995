"""One runner per workload kind, behind one interface (interface.py):

    record = runner(workload, RunContext(devices, splits, ...))

The sweep (experiments/harness/sweep.py: `RUNNERS`, `run_workload`) picks a workload's
runner by its kind and sets the matmul precision around it. Every runner returns the
workload's record whatever happens while it runs; `interface.recorded` is the one place
an outcome (ok, a NaN loss, out of memory, any other failure) becomes that record.
Mistakes in what was asked (JaxcnnError) propagate.

- `train` (runners/train.py): the placed train step compiled, timed, then trained.
- `matmul` (runners/matmul.py): one square matmul timed, the device's ceiling.
- `ensemble` (runners/ensemble.py): K models trained vmapped together or one by one.
- `compile` (experiments/harness/compile_only.py): compiled for a target not at hand, not run.
"""
