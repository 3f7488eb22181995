"""The report says each rule one way on every page: what memory a step may use to fit a
chip, what the whole-program roofline is called, what "measured" and "published" mean;
and every table tells apart what it puts side by side (epochs, runs superseded, paired
runs). The report is generated from hand-made records; each page's own statements of a
rule are read back from its text, and two pages that state it differently fail."""

import re
from collections import defaultdict

from conftest import complete_record
from test_report import CPU, _record
from test_report_targets import MX150, _compiled, _prediction

from experiments import records, report
from experiments.studies._common import fmt_test_acc
from jaxcnn import targets as targets_lib

GIB = 2**30


def _kind(m: re.Match) -> str:
    """What an error band's observations are called: published or measured."""
    return "published figures" if "published" in m[1] else "measured steps"


# rule -> [(pattern, what a match states)]: every way a page has stated the rule. A
# wording a page once used stays here, so that it is caught if it comes back.
RULES = {
    "usable memory": [
        (r"(\d+)% of a GPU's datasheet memory", lambda m: f"{m[1]}% of the datasheet"),
        (r"JAX can use of each \((\d+)% of the chip\)", lambda m: f"{m[1]}% of the datasheet"),
        (r"fits the chip's datasheet memory", lambda m: "100% of the datasheet"),
        (r"compiled, but more than the chip has", lambda m: "100% of the datasheet"),
    ],
    "the roofline bound": [
        (
            r"lower bound only under (?:its|those) assumptions",
            lambda m: "under assumptions",
        ),
        (r"lower bound(?! only under)", lambda m: "a lower bound, no condition"),
    ],
    "what an accelerator's error band is over": [
        (r"(?:GPUs|TPUs), leave one \w+ out: [^;]*?over \d+ ([a-z ]+?)[;.)]", _kind),
        (r"published and measured step times", lambda m: "measured steps"),
    ],
}


def statements(pages: dict[str, str]) -> dict[str, dict[str, set[str]]]:
    """{rule: {what it states: the pages stating it}}, read from the pages' text."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for page, text in pages.items():
        for rule, patterns in RULES.items():
            for pattern, meaning in patterns:
                for m in re.finditer(pattern, text):
                    found[rule][meaning(m)].add(page)
    return found


def contradictions(pages: dict[str, str]) -> dict[str, dict[str, set[str]]]:
    """The rules stated more than one way, with who says what."""
    return {rule: dict(said) for rule, said in statements(pages).items() if len(said) > 1}


MX150_USABLE = {
    **MX150,
    "devices": 1,
    "memory_per_device_bytes": 2 * GIB,
    "usable_fraction": targets_lib.USABLE_FRACTION["gpu"],
    "usable_bytes_per_device": int(2 * GIB * targets_lib.USABLE_FRACTION["gpu"]),
}


def _records() -> list[dict]:
    usable = MX150_USABLE["usable_bytes_per_device"] / GIB
    fits, over = 1.42, 1.75  # seed 000's batches 16 and 32: 1.75 fits 2 GiB, not 1.5
    assert fits <= usable < over < 2
    compiled = [
        _compiled(MX150_USABLE, "catsdogs_cnn", 16, "ok", fits, step=0.5, fits=True),
        _compiled(MX150_USABLE, "catsdogs_cnn", 32, "oom", over, step=0.9, fits=False),
    ]
    measured = _record("r1", CPU, "mlp", 128, median=0.05, width=64, params=55_050)
    measured["workload"].update(study="roofline", dataset="synthetic")
    bound = _prediction(0.08, 128) | {"method": "roofline bound"}  # beaten: 0.08 > 0.05
    measured.update(prediction=bound, prediction_bound=bound)
    return [*compiled, measured]


def _pages(tmp_path, rs) -> dict[str, str]:
    path, _ = report.write_report(rs, tmp_path / "out")
    pages = {"REPORT.md": path.read_text()}
    for page in sorted((path.parent / "report").glob("*.md")):
        pages[page.name] = page.read_text()
    return pages


def test_every_page_states_each_rule_one_way(tmp_path):
    pages = _pages(tmp_path, _records())
    assert contradictions(pages) == {}
    said = statements(pages)
    # Each rule is stated, and as the code applies it.
    gpu = f"{targets_lib.USABLE_FRACTION['gpu']:.0%} of the datasheet"
    assert set(said["usable memory"]) == {gpu}
    assert {"REPORT.md", "targets.md", "targets-catsdogs_cnn.md"} <= said["usable memory"][gpu]
    assert set(said["the roofline bound"]) == {"under assumptions"}
    assert set(said["what an accelerator's error band is over"]) == {"published figures"}


def test_a_page_that_states_a_rule_another_way_is_caught(tmp_path):
    pages = _pages(tmp_path, _records())
    for rule, wording in (
        ("usable memory", "whether it fits the chip's datasheet memory"),
        ("the roofline bound", "and the whole-program roofline, a lower bound."),
        (
            "what an accelerator's error band is over",
            "GPUs, leave one chip out: large programs: median 52%, worst 163% over 12 "
            "measured steps;",
        ),
    ):
        found = contradictions({**pages, "contradicting.md": wording})
        assert set(found) == {rule}, rule
        assert any("contradicting.md" in said for said in found[rule].values())


def test_seed_000_says_its_verdict_rests_on_the_usable_memory_rule(tmp_path):
    text = _pages(tmp_path, _records())["REPORT.md"]
    assert (
        "The verdict rests on the usable-memory rule: batch 32 on `gpu-mx150` needs 1.75 GiB, "
        "within the chip's 2 GiB datasheet memory but over the 1.5 GiB JAX can use of it, "
        "so against the datasheet it would fit"
    ) in text
    # The control: where the step is over the datasheet too, nothing rests on the rule.
    rs = _records()
    rs[1]["memory"]["total_bytes"] = int(2.5 * GIB)
    assert "rests on the usable-memory rule" not in _pages(tmp_path / "b", rs)["REPORT.md"]


def test_the_bound_is_named_one_way_and_the_steps_that_beat_it_counted(tmp_path):
    roofline = _pages(tmp_path, _records())["roofline.md"]
    assert "roofline bound s/step" in roofline
    assert "The roofline bound: 1 of these 1 measured steps beat it" in roofline


def test_an_accuracy_says_how_many_epochs_it_is_after():
    five = _record("a5", CPU, "mnist_cnn", 128)
    five["history"] = [{"epoch": e, "test_accuracy": 0.9} for e in range(1, 6)]
    one = _record("a1", CPU, "mnist_cnn", 128)
    one["history"] = [{"epoch": 1, "test_accuracy": 0.9}]
    assert fmt_test_acc(five) == "0.8750 after 5 epochs"
    assert fmt_test_acc(one) == "0.8750 after 1 epoch"


def _paired() -> dict:
    side = {"median": 2000.0, "p10": 1900.0, "p90": 2100.0, "n": 7, "steps": 20}
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": "p1",
        "status": "ok",
        "workload": {
            "model": "lenet5_keras",
            "model_overrides": {},
            "dataset": "mnist",
            "batch_size": 128,
            "precision": "f32",
            "strategy": "single",
            "kind": "paired",
            "study": "bench",
            "epochs": 0,
        },
        "device": CPU,
        "env": {"utc_time": "2026-11-24T08:06:24+00:00"},
        "session": {"id": "s", "pass": 2, "passes": 3},
        "paired": {
            "jax": {
                "configuration": "jax onednn device f32",
                "host_memory": "retain",
                "throughput": side,
            },
            "peer": {
                "configuration": "torch compile",
                "host_memory": "retain",
                "throughput": {**side, "median": 1600.0},
            },
            "ratio": {"median": 1.25, "p10": 1.1, "p90": 1.4, "n": 7},
            "rounds": [
                {"first": "jax", "jax": {"images_per_s": 2000.0}, "peer": {"images_per_s": 1600.0}}
            ]
            * 7,
        },
    }
    return complete_record(record)


def test_every_records_row_says_how_it_ran_and_paired_runs_show_their_figures(tmp_path):
    step = _record("s1", CPU, "mnist_cnn", 128)
    device_loop = _record("s2", CPU, "mnist_cnn", 128, loop="device")
    device_loop["workload"].update(study="bench", loop="device")
    page = _pages(tmp_path, [step, device_loop, _paired()])["records.md"]
    results = page.split("## Results")[1].split("## Paired runs")[0]
    header = next(line for line in results.splitlines() if line.startswith("| date"))
    for column in ("study", "framework", "formulation", "loop", "K"):
        assert f"| {column} |" in header, column
    rows = [line for line in results.splitlines() if "| mnist_cnn |" in line]
    assert len(rows) == 2 and rows[0] != rows[1]  # one workload, two runs told apart
    assert all(" - | - | - | - | - | - |" not in line for line in results.splitlines())
    paired = page.split("## Paired runs")[1]
    assert (
        "| 2026-11-24 | cpu | lenet5_keras | 128 | f32 | jax onednn device f32 | torch compile "
        "| 2,000 [1,900-2,100] | 1,600 [1,900-2,100] | 1.25 [1.10-1.40] | 2/3 | ok |"
    ) in paired


def test_open_searches_say_why_in_the_cell_and_in_the_one_line_that_counts_them(tmp_path):
    from experiments.studies.targets import PER_DEVICE_CAP, targets_answer

    stopped = _compiled(MX150_USABLE, "catsdogs_cnn", 16, "ok", 1.0, step=0.5, fits=True)
    capped = _compiled(MX150_USABLE, "lenet5", PER_DEVICE_CAP, "ok", 1.0, step=0.5, fits=True)
    text, _ = targets_answer([stopped, capped], tmp_path)
    assert "| >= 16 (stopped) / 1 GiB /" in text
    assert f"| >= {PER_DEVICE_CAP} (cap) / 1 GiB /" in text
    assert (
        "`>= N`: the largest batch that fits is at least N, no batch above N having been "
        "found not to fit, in 2 of these searches: 1 (stopped): the search stopped before "
        f"its next compile; 1 (cap): the search reached the study's cap of {PER_DEVICE_CAP:,} "
        "per device;"
    ) in text
    assert "searches were stopped" not in text  # the count of one kind beside all the cells
