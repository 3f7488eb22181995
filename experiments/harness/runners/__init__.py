"""One runner per workload kind, behind one interface (interface.py):

    found = runner(workload, RunContext(devices, splits, ...))

The sweep (experiments/harness/sweep.py: `RUNNERS`, `run_workload`) picks a workload's
runner by its kind, sets the matmul precision around it and makes its record: a runner
makes none, it returns its outcome whatever happens while it runs, and
`interface.outcome` is the one place what happened (ok, a NaN loss, out of memory, any
other failure) becomes that outcome. Mistakes in what was asked (JaxcnnError) propagate.

- `train` (runners/train.py): the placed train step compiled, timed, then trained.
- `matmul` (runners/matmul.py): one square matmul timed, the device's ceiling.
- `ensemble` (runners/ensemble.py): K models trained vmapped together or one by one.

Kind `compile` (experiments/harness/compile_only.py: `run_target`) makes its own record:
it is compiled for a target not at hand, on that target's devices, not run.
"""
