"""Many hosts: `jax.distributed.initialize`, with mistakes reported instead of hangs.

    jaxcnn.distributed.initialize("10.0.0.1:1234", num_processes=2, process_id=0)  # host 0
    jaxcnn.distributed.initialize("10.0.0.1:1234", num_processes=2, process_id=1)  # host 1
    jaxcnn.distributed.initialize("auto")  # TPU pods, Slurm, Open MPI: JAX detects them

Call it before any other JAX call. Afterwards `jax.devices()` lists every process's
devices and the placements in `jaxcnn.parallel` span them all.

Why the checks before JAX's own call: when the coordinator cannot be reached,
`jax.distributed.initialize` (jaxlib 0.10) does not raise; after its timeout the
coordination client aborts the whole process with a C++ stack trace. So the address
is parsed, resolved and probed here first (process 0 checks that it can bind the
port, the others that something listens there, retrying until `timeout_s`, since
process 0 may start later), and a bad one is a `UsageError` naming it.
"""

from __future__ import annotations

import socket
import time

import jax
import numpy as np

from jaxcnn.errors import UsageError

AUTO = "auto"
DEFAULT_TIMEOUT_S = 300  # JAX's own default initialization_timeout
_RETRY_S = 0.5


def parse_address(address: str) -> tuple[str, int]:
    """Parse "HOST:PORT" (IPv6 as "[::1]:PORT") into (host, port), or raise UsageError."""
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"coordinator must be HOST:PORT (e.g. 10.0.0.1:1234), got {address!r}")
    return host, int(port)


def _resolve(host: str, port: int) -> list[tuple]:
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise UsageError(f"coordinator host {host!r} does not resolve: {e.strerror}") from None


def _check_bindable(host: str, port: int) -> None:
    """Process 0 runs the coordinator service: the port must be free on this host."""
    family, kind, proto, _, _ = _resolve(host, port)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:  # JAX binds every interface by default (coordinator_bind_address)
            probe.bind(("::" if family == socket.AF_INET6 else "", port))
        except OSError as e:
            raise UsageError(
                f"process 0 cannot serve the coordinator on port {port}: {e.strerror or e}"
            ) from None


def _wait_reachable(host: str, port: int, timeout_s: float) -> None:
    """The other processes wait, up to `timeout_s`, for process 0's coordinator."""
    deadline = time.monotonic() + timeout_s
    last: OSError | None = None
    while True:
        for family, kind, proto, _, addr in _resolve(host, port):
            try:
                with socket.socket(family, kind, proto) as probe:
                    probe.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
                    probe.connect(addr)
                return
            except OSError as e:
                last = e
        if time.monotonic() >= deadline:
            reason = last.strerror if last and last.strerror else last
            raise UsageError(
                f"coordinator {host}:{port} not reachable within {timeout_s:g} s ({reason}); "
                "start process 0 first or check the coordinator address"
            )
        time.sleep(_RETRY_S)


def _use_cpu_collectives() -> None:
    # Cross-process collectives on CPU need an implementation; jaxlib 0.10 defaults to
    # gloo, older ones to none (then multi-process CPU steps fail at run time).
    if jax.config.jax_cpu_collectives_implementation in (None, "", "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> bool:
    """Join a multi-process run; True when `jax.distributed.initialize` was called.

    - coordinator None (and no num_processes/process_id): one process, nothing to do.
    - coordinator "auto": JAX's cluster detection (TPU pods, Slurm, Open MPI);
      num_processes/process_id, when given, are passed on.
    - coordinator "HOST:PORT": all three are required; checked before JAX is called.
    """
    if coordinator is None:
        if num_processes is not None or process_id is not None:
            raise UsageError("num_processes and process_id need coordinator=HOST:PORT")
        return False
    if timeout_s <= 0:
        raise UsageError(f"the coordinator timeout must be positive, got {timeout_s}")
    if coordinator != AUTO:
        if num_processes is None or process_id is None:
            raise UsageError("coordinator=HOST:PORT needs num_processes and process_id")
        if num_processes < 1 or not 0 <= process_id < num_processes:
            raise UsageError(
                f"process_id must be in 0..{num_processes - 1} for num_processes="
                f"{num_processes}, got {process_id}"
            )
        host, port = parse_address(coordinator)
        if process_id == 0:
            _check_bindable(host, port)
        else:
            _wait_reachable(host, port, timeout_s)
    _use_cpu_collectives()
    # JAX's preemption service would catch SIGTERM in C++, out of reach of the Python
    # handler that stops training at a step boundary (experiments.cli.run), and its sync
    # point counts calls that Orbax also makes with checkpoint steps. Stopping is agreed
    # by jaxcnn.loop.stop_agreed instead.
    jax.config.update("jax_enable_preemption_service", False)
    try:
        jax.distributed.initialize(
            coordinator_address=None if coordinator == AUTO else coordinator,
            num_processes=num_processes,
            process_id=process_id,
            initialization_timeout=max(1, int(timeout_s)),
        )
    except (RuntimeError, ValueError) as e:  # e.g. JAX already started, or no cluster found
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"jax.distributed.initialize failed: {first}") from None
    return True


def shutdown() -> None:
    """Leave a multi-process run that `initialize` joined: every process meets in JAX's
    shutdown barrier before process 0 stops the coordination service. Left to JAX's
    exit hook, that happens as the interpreter tears down, where process 0 can stop the
    service while a peer is still leaving, and one of them aborts (SIGABRT in gRPC's
    server teardown) after its work and its records are done."""
    jax.distributed.shutdown()


def processes_with(flag: bool) -> list[int]:
    """The indices of the processes whose `flag` is true: the same list on every process.

    With many processes this is a collective, so every process must call it at the same
    point of the same sequence of steps, and with no step in flight whose collectives
    could pair up with it in another order (after a sync to the host).
    """
    if jax.process_count() == 1:
        return [0] if flag else []
    from jax.experimental import multihost_utils

    flags = multihost_utils.process_allgather(np.array([flag], bool)).reshape(-1)
    return [int(i) for i in np.flatnonzero(flags)]
