"""What every study module builds on: the Context a study sizes its workloads by, the
Study record the registry holds, and the --smoke sizes several studies share (the
package's docstring says how a study sizes its workloads)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from experiments.studies.page import Page

if TYPE_CHECKING:  # the annotations only: importing a study starts no JAX
    from experiments.records.workload import Workload


@dataclasses.dataclass(frozen=True)
class Context:
    """What a study may depend on: the platform, how many devices, --smoke."""

    platform: str = "cpu"  # cpu | gpu | tpu
    num_devices: int = 1
    smoke: bool = False

    @property
    def cpu(self) -> bool:
        return self.platform == "cpu"


@dataclasses.dataclass(frozen=True)
class TargetCell:
    """One model x target x precision of the targets study: its batches are searched
    (experiments/compile_only.batch_search), so it is not a fixed list of workloads."""

    model: str
    target: str
    precision: str
    strategy: str
    start: int  # the first global batch tried
    step: int  # batches are multiples of this (the target's devices)
    cap: int  # the largest global batch tried
    # The model's overrides, as (field, value) pairs (mlp's width); none: its defaults.
    overrides: tuple[tuple[str, Any], ...] = ()


@dataclasses.dataclass(frozen=True)
class Study:
    """One question: what it runs. `workloads` sizes the runs on the devices at hand;
    `cells`, for a study compiled for devices not at hand, its (model, target, precision)
    batch searches; neither, for the default study, whose models take the command's
    flags. `page`, its details page of the report (the page named as the study), a
    view of the table of figures; none: the study has no page. `host_memory`, the host
    allocator policy its workloads need where the command leaves it `auto`
    (jaxcnn/host_memory.py; the process takes `system` if any of its studies asks it)."""

    name: str
    workloads: Callable[[Context], list[Workload]] | None = None
    cells: Callable[[bool], list[TargetCell]] | None = None
    question: str = ""
    page: Page | None = None
    host_memory: str = "auto"


# --smoke: every study in seconds on a CPU.
SMOKE_TIMING = {"timing_steps": 3}
SMOKE_TRAIN = {"dataset": "digits", "batch_size": 32, "epochs": 1, "steps": 3, **SMOKE_TIMING}
# catsdogs_cnn with its layer structure kept (5 blocks, pools 2,2,2,3,3, BatchNorm,
# dropout) but 4 channels, 8 dense units and 96x96 inputs: compiles and steps in a second.
SMOKE_CATSDOGS = {
    "widths": ((4,), (4,), (4,), (4,), (4,)),
    "dense_width": 8,
    "input_size": 96,
}
TINY_MLP = {"width": 8}


def dataset_for(ctx: Context, name: str = "mnist") -> str:
    """The real dataset `name`, or the embedded digits under --smoke."""
    return "digits" if ctx.smoke else name
