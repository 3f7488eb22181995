"""The host's side of a step in jaxcnn's loops, and the loop step around a device step:
what the host adds around the kernels (the step loop's host parts as jaxcnn.host_loop
measured them, the batch over the chip's link, a call's round trip), each from a
measurement or a published link rate, never fitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxcnn import host_loop


def measured_dispatch(placement: str, table: Mapping[str, Any]) -> float | None:
    """The host's round trip of one step placed `placement` (single, pmap, sharded) as
    this project's runs measured it (the constants file's `host`: the median of the
    records' `dispatch_s`; `table`: jaxcnn.perf.predict.constants()), or None where no
    run measured that placement.

    A step placed over devices does at least the host work of one device's call, so a
    placement measured faster than `single` (medians of other runs, on a loaded
    machine) takes single's: else a step spread over N devices would be predicted to
    dispatch faster than one device's, and N devices more than N times as fast."""
    measured = (table.get("host") or {}).get("dispatch_s") or {}
    own, single = measured.get(placement), measured.get("single")
    return own if own is None or single is None else max(own, single)


def measured_host_loop(
    workload: Mapping[str, Any], table: Mapping[str, Any]
) -> dict[str, Any] | None:
    """jaxcnn's step loop on this project's host for a workload's model (with its
    overrides) at its global batch: the newest measured record's `host_loop` (the
    constants file's `host.loop`), or None where no run measured that model and batch."""
    host = table.get("host") or {}
    return (host.get("loop") or {}).get(host_loop_key(workload))


def host_loop_key(workload: Mapping[str, Any]) -> str:
    """Where the constants file keeps a workload's measured host loop: its model, the
    overrides that make it another network (a width, an image size), its global batch
    (what the host's parts depend on: the arrays gathered, the state's leaves)."""
    overrides = workload.get("model_overrides") or {}
    named = "".join(f" {k}={v}" for k, v in sorted(overrides.items()))
    return f"{workload['model']}{named}, batch {workload['batch_size']}"


def host_side(
    *,
    measured: Mapping[str, Any] | None,
    dispatch_s: float | None,
    batch_bytes: int,
    host_link_bytes_per_s: float | None,
    platform: str = "gpu",
    steps_per_epoch: int | None = None,
    loop: str = "step",
    steps: int = 1,
) -> dict[str, Any]:
    """What the host adds around a step's kernels in jaxcnn's loops (`predict`'s `host`):

    - parts: the step loop's host parts per step (jaxcnn.host_loop.per_step of
      `measured`, a record's `host_loop`: measured with the loop's own code on the host
      that runs it), each None where nothing was measured;
    - transfer_s: the batch's bytes over the chip's link to its host, once per step of
      the step loop (the device loop's dataset crosses once, before training); 0 on a
      CPU, whose device memory is the host's; None where no link figure is published;
    - call_s: one call's round trip (`dispatch_s`: a call of the placed step doing no
      work, measured here), which the device loop pays once per epoch;
    - steps_per_epoch: the epoch's steps where the dataset's size is known;
    - host_s: what a step timed alone (a record's `step_time_s`) adds to its kernels:
      in the step loop (`loop`) the call's round trip and the batch's copy, in the
      device loop the call's round trip shared by the `steps` steps of one call (each
      0 where it has no figure); the fit adds it, known, to its observations."""
    transfer = None
    if platform == "cpu":
        transfer = 0.0
    elif host_link_bytes_per_s:
        transfer = batch_bytes / host_link_bytes_per_s
    parts = (
        host_loop.per_step(measured, steps_per_epoch)
        if measured
        else dict.fromkeys(host_loop.PARTS)
    )
    return {
        "parts": parts,
        "transfer_s": transfer,
        "call_s": dispatch_s,
        "steps_per_epoch": steps_per_epoch,
        "host_s": (dispatch_s or 0.0) / max(1, steps)
        + ((transfer or 0.0) if loop == "step" else 0.0),
    }


def loops(device_step_s: float, host: Mapping[str, Any], platform: str) -> dict[str, Any]:
    """The loop step, the epoch and the device loop's step around a device step of
    `device_step_s` with the host side `host` (`host_side`):

    - loop_step_s (jaxcnn.host_loop.loop_step: the step loop's host parts and the
      batch's copy, overlapped or serialised as the loop runs them), loop_parts,
      loop_left_out, loop_overlap, loop_bound;
    - epoch_s: an epoch's loop steps, where its steps are known; its evaluation is not
      priced (no eval-step kernels are read) and is named in `epoch_left_out`;
    - device_loop_step_s: a step of the device loop (a whole epoch as one lax.scan):
      the device step plus its share of the epoch's one call (the call's round trip),
      no copy; None where the epoch's steps or the call are unknown."""
    loop = host_loop.loop_step(device_step_s, host["parts"], host["transfer_s"], platform=platform)
    per_epoch = host.get("steps_per_epoch")
    call = host.get("call_s")
    return {
        **loop,
        "epoch_s": per_epoch * loop["loop_step_s"] if per_epoch else None,
        "epoch_steps": per_epoch,
        "epoch_left_out": ["evaluation (no eval-step kernels priced)"]
        + ([] if per_epoch else ["the epoch's steps (the dataset's size is not known)"]),
        "device_loop_step_s": (
            device_step_s + call / per_epoch if per_epoch and call is not None else None
        ),
    }
