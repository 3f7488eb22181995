"""A study's page of the report, declared beside its workloads: a title and sections,
each a filter of the table of figures (the pandas DataFrame experiments/report/figures.py
builds; its columns are named in figures.table_schema), and the filters the report's
answers and pages share. The functions only call the table's own methods: importing a
study imports no pandas, so the CLI lists the studies before pandas loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the annotations only
    import pandas as pd

Select = Callable[["pd.DataFrame"], "pd.DataFrame"]


@dataclass(frozen=True)
class Section:
    """One table of a page: a filter of the table, shown as a list of `columns` (words
    of experiments/report/views.COLUMNS' keys) or, with `pivot` (down, across), as a
    matrix."""

    title: str
    select: Select
    columns: str = "model batch device kind quantity value spread how band"
    pivot: tuple[str, str] | None = None
    verdict: Callable[[pd.DataFrame], str] | None = None  # said under the rows, from them


class Page(NamedTuple):
    """A details page of the report: its title and its sections, in order."""

    title: str
    sections: list[Section]


# how far a chip's loop step moves between sittings (figures.run_spread rows)
SITTING_TO_SITTING = "loop step, sitting to sitting"


def sitting_spread(table: pd.DataFrame, device: str) -> pd.DataFrame:
    """`device`'s run_spread row of its loop step between sittings (`hi`: the worst)."""
    return rows(table, quantity="run_spread", device=device, extra=SITTING_TO_SITTING)


def rows(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """The rows whose columns equal `where`'s values (a list: any of them)."""
    for column, value in where.items():
        many = isinstance(value, (list, tuple, set))
        table = table[table[column].isin(list(value)) if many else table[column] == value]
    return table


def select(**where: Any) -> Select:
    """A section's filter: the rows whose columns equal `where`'s values (`rows`)."""
    return lambda t: rows(t, **where)


def where(test: Callable[[pd.DataFrame], pd.Series]) -> Select:
    """A section's filter: the rows `test` marks."""
    return lambda t: t[test(t)]


def extra_contains(pattern: str, **where: Any) -> Select:
    """A section's filter: the rows matching `where` whose `extra` contains `pattern`."""

    def chosen(t: pd.DataFrame) -> pd.DataFrame:
        found = rows(t, **where)
        return found[found.extra.astype(str).str.contains(pattern, regex=False)]

    return chosen


def reference_cpu(table: pd.DataFrame) -> str | None:
    """The CPU the answers quote: the named CPU with the most measured steps."""
    cpu = rows(table, quantity="step_s", kind="measured", platform="cpu")
    named = cpu[~cpu.device.str.contains("not recorded")]
    counts = (named if len(named) else cpu).device.value_counts()
    return str(counts.index[0]) if len(counts) else None


SEED_MODELS = ["catsdogs_cnn", "mnist_cnn", "lenet5_keras", "mlp"]
# The data the seed models' steps are shown on: MNIST, and synthetic images where no data
# set is needed (catsdogs_cnn; the crossover's mlp). A chip's run of the same step on
# Fashion-MNIST (the accuracy study's) would be a second figure for one chip and model.
SEED_DATASETS = ("mnist", "synthetic")


def on_seed_data(found: pd.DataFrame) -> pd.DataFrame:
    """The measured rows of `found` on the seeds' data (SEED_DATASETS), and every other."""
    return found[(found.kind != "measured") | found.dataset.isin(SEED_DATASETS)]


BY_CHIP = ("model", "device")  # a pivot: the models down, the chips across
# A prediction of a published step is of that publication's own loop, not of jaxcnn's
# loop step on the chip: its note says so wherever it is printed.
OURS_FOR_PUBLISHED = "ours for the published loop"
# A measured step of jaxcnn's own loop (its `extra`): what a user's epoch sees.
LOOP = "jaxcnn's loop"
# a measured chip's fastest step of a workload (its device loop, where that ran)
AT_ITS_BEST = "at its best"
# a banded prediction's lo and hi: its value divided and multiplied by its band's worst
BAND_EITHER_WAY = "its band's worst either way"
# ... of a published JAX loop of a small program: a loop step, its parts said after it.
OURS_LOOP_STEP = f"{OURS_FOR_PUBLISHED}, its loop step"
# A step timed in the device loop over the same step in the step loop (figures.setting_speedups).
DEVICE_OVER_STEP_LOOP = "device loop vs step loop"
# An accelerator run's memory (its `extra`): its own compiler's analysis of the program it
# ran; the allocator's peak, which counts a study's earlier workloads in the process; and,
# where the workload raised that peak, its own peak over what it found in use.
ON_THE_CHIP = "compiled on the chip as it ran"
ALLOCATOR_PEAK = (
    "the allocator's peak since the process started (its probes and earlier workloads too)"
)
WORKLOAD_PEAK = "the allocator's peak in this workload, over what it found in use"
# A target's memory a program may use of each chip: what every fit verdict is held to.
USABLE = "what a program may use of each chip"


def one_chip(found: pd.DataFrame) -> pd.DataFrame:
    """The rows of one chip, its program not split over several."""
    return found[(found.devices == 1) & (found.placement == "single")]


def per_chip(
    t: pd.DataFrame, quantity: str, models: list[str] | None = SEED_MODELS
) -> pd.DataFrame:
    """One chip's predicted `quantity` at batch 128, f32 (of the seed models, or all)."""
    found = rows(t, quantity=quantity, kind="predicted", batch=128, precision="f32")
    return one_chip(found[found.model.isin(models)] if models else found)


def of_ensembles(t: pd.DataFrame) -> pd.Series:
    """Which rows are K models' (an ensemble's), not one model's."""
    return t.ensemble_size.notna()
