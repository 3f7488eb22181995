"""Running workloads: the sweep, what a workload needs from JAX, timing, the runners,
compile-only and its isolated child."""
