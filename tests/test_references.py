"""The committed reference set loads, and a bad row is refused in one line naming it."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from conftest import typed
from test_prediction import compile_record

from experiments.cli import fit as fit_cli
from experiments.predict import references
from experiments.predict import shown as predictions
from jaxcnn.errors import DataError

REPO = Path(__file__).resolve().parents[1]
# The reference set's own files: what this data set puts in front of a user.
REFERENCE_SET_FILES = (
    references.REFERENCES_PATH,
    references.OVERHEADS_PATH,
    REPO / "experiments" / "predict" / "references.py",
    REPO / "docs" / "references.md",
)
# Spelled in pieces so that this file does not contain what it looks for.
MACHINE_ONLY_PATHS = (".." + "/shared", "/work" + "/shared")


def _valid_row() -> dict:
    """A copy of a committed row that has a batch, a throughput and a step time."""
    row = next(r for r in references.load() if r.id == "seed000-mx150-catsdogs")
    return dataclasses.asdict(row)


def _load_one(tmp_path: Path, row: dict) -> list[references.Reference]:
    path = tmp_path / "refs.json"
    path.write_text(json.dumps([row]))
    return references.load(path)


def _refused(tmp_path: Path, row: dict) -> str:
    with pytest.raises(DataError) as caught:
        _load_one(tmp_path, row)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_every_committed_reference_loads():
    rows = references.load()
    assert len(rows) >= 15
    assert len({r.id for r in rows}) == len(rows)
    assert {"resnet50", "catsdogs_cnn", "mnist_cnn", "mlp", "lenet5"} <= {r.model for r in rows}
    assert {"A100", "V100 SXM2", "TPU v3", "T4", "MX150", "K80", "P100 PCIe"} <= {
        r.chip for r in rows
    }


def test_resnet50_on_gpus_is_fitted_on_three_chips_and_each_new_row_says_its_batch():
    rows = {r.id: r for r in references.load()}
    fitted = {
        r.chip
        for r in rows.values()
        if r.model == "resnet50" and r.held_out is None and not r.chip.startswith("TPU")
    }
    # A chip held out by leave one chip out must leave two others to refit from.
    assert fitted == {"A100", "V100 SXM2", "H100 SXM"}
    h100 = rows["lambda-pyt-h100-sxm-tf32"]
    assert (h100.precision, h100.batch_per_chip, h100.images_per_s_per_chip) == (
        "tf32",
        640,
        1753.83,
    )
    assert "1753.83 images/s" in h100.quote and "/a8e6d619986c479ef0112cfd015f8a26b95e2759/" in (
        h100.source_url
    )
    # Rows that run another program than jaxcnn's are shown, never fitted, and say why.
    for held in (
        "lambda-pyt-h100-sxm-amp-nchw",
        "lambda-pyt-a100-amp-nchw",
        "lambda-pyt-a100-tf32",
        "tf-cnn-k80-fp32-b64",
        "tf-cnn-k80-fp32-b32",
    ):
        assert rows[held].held_out and rows[held].batch_per_chip


def test_every_small_model_row_is_held_out_and_five_of_them_are_predictable():
    """The small regime's rows are framework loops (Keras epochs, PyTorch loops, the
    seeds' runs), never jaxcnn's step: none is fitted, so the small-model band can be
    measured on them out of sample, and it needs five."""
    small = [r for r in references.load() if r.model not in ("resnet50", "resnet18", "vgg16")]
    assert all(r.held_out for r in small), [r.id for r in small if not r.held_out]
    predictable = [r for r in small if predictions.unpredictable(r) is None]
    assert len(predictable) >= 5
    assert {"seed000-mx150-catsdogs", "seed000-t4-catsdogs"} <= {r.id for r in predictable}


def test_every_committed_overhead_loads():
    rows = references.load_overheads()
    assert rows and all(r.seconds < 1e-3 for r in rows)  # per kernel: microseconds


def test_a_valid_row_loads(tmp_path):
    row = _valid_row()
    (loaded,) = _load_one(tmp_path, row)
    assert loaded.id == row["id"] and loaded.step_time_s == row["step_time_s"]


def test_a_row_without_its_quote_is_refused_by_id(tmp_path):
    row = _valid_row()
    del row["quote"]
    message = _refused(tmp_path, row)
    assert "'seed000-mx150-catsdogs'" in message and "quote" in message


def test_an_empty_quote_is_refused(tmp_path):
    message = _refused(tmp_path, _valid_row() | {"quote": "  "})
    assert "'seed000-mx150-catsdogs'" in message and "quote" in message


def test_a_negative_throughput_is_refused_by_id(tmp_path):
    message = _refused(tmp_path, _valid_row() | {"images_per_s_per_chip": -30.1})
    assert "'seed000-mx150-catsdogs'" in message and "images_per_s_per_chip" in message


def test_an_unknown_field_is_refused_by_id(tmp_path):
    message = _refused(tmp_path, _valid_row() | {"images_per_sec": 30.1})
    assert "'seed000-mx150-catsdogs'" in message and "images_per_sec" in message


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("chip", "Z9000", "chip"),
        ("model", "resnet51", "model"),
        ("precision", "fp16", "precision"),
        ("source_url", "see the README", "source_url"),
        ("batch_per_chip", 16.5, "whole number"),
        ("chips", True, "chips"),
        ("image_size", None, "image_size"),
        ("id", "Seed 000", "slug"),
        pytest.param(
            "chips", 10**400, "row 'seed000-mx150-catsdogs': chips must be", id="chips-401-digits"
        ),
        pytest.param(
            "images_per_s_per_chip", 10**400, "must be a positive number", id="rate-401-digits"
        ),
        ("model_overrides", {"width": 0}, "model_overrides must be an object of positive"),
        ("model_overrides", "width=1024", "model_overrides must be an object of positive"),
    ],
)
def test_a_bad_value_is_refused_in_one_line(tmp_path, field, value, said):
    message = _refused(tmp_path, _valid_row() | {field: value})
    assert said in message


def test_a_chip_outside_the_table_loads_only_when_listed(tmp_path):
    assert "x86 CPU" in references.CHIPS_NOT_IN_TABLE
    assert _load_one(tmp_path, _valid_row() | {"chip": "x86 CPU"})
    assert "chip" in _refused(tmp_path, _valid_row() | {"chip": "x87 CPU"})


def test_a_row_needs_a_throughput_or_a_step_time(tmp_path):
    row = _valid_row() | {"images_per_s_per_chip": None, "step_time_s": None}
    assert "step_time_s" in _refused(tmp_path, row)
    assert _load_one(tmp_path, row | {"step_time_s": 0.532})  # either one is enough


def test_a_throughput_that_disagrees_with_its_step_time_is_refused(tmp_path):
    message = _refused(tmp_path, _valid_row() | {"images_per_s_per_chip": 301.0})
    assert "must agree" in message


def test_a_repeated_id_is_refused(tmp_path):
    path = tmp_path / "refs.json"
    path.write_text(json.dumps([_valid_row(), _valid_row()]))
    with pytest.raises(DataError, match="appears twice"):
        references.load(path)


def test_a_file_that_is_not_a_list_is_refused(tmp_path):
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(_valid_row()))
    with pytest.raises(DataError, match="JSON list"):
        references.load(path)


def test_a_reference_file_above_its_bound_or_not_a_file_is_refused_unread(tmp_path):
    path = tmp_path / "refs.json"
    path.write_text(json.dumps([_valid_row()]))
    assert len(references.load(path)) == 1  # positive control
    with open(path, "r+b") as handle:  # sparse: no disk spent, and never read
        handle.truncate(references.MAX_REFERENCE_BYTES + 1)
    with pytest.raises(DataError, match="16,777,217 bytes, above the 16,777,216"):
        references.load(path)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # opening it would wait for a writer for ever
    with pytest.raises(DataError, match="is not a regular file"):
        references.load(fifo)


def test_an_overhead_on_an_unknown_platform_is_refused(tmp_path):
    row = dataclasses.asdict(references.load_overheads()[0])
    path = tmp_path / "overheads.json"
    path.write_text(json.dumps([row]))
    assert references.load_overheads(path)
    path.write_text(json.dumps([row | {"platform": "fpga"}]))
    with pytest.raises(DataError, match="platform"):
        references.load_overheads(path)


def _mentions_machine_only_path(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    return any(needle in text for needle in MACHINE_ONLY_PATHS)


def test_no_reference_set_file_points_at_this_machines_shared_folder(tmp_path):
    leaky = tmp_path / "leaky.md"
    leaky.write_text("copied from " + MACHINE_ONLY_PATHS[0] + "/seeds")
    assert _mentions_machine_only_path(leaky)  # positive control: the check can fire
    assert not [p for p in REFERENCE_SET_FILES if _mentions_machine_only_path(p)]


def _bad_references(tmp_path: Path, monkeypatch) -> str:
    """The committed references with one row's count a 401-digit integer, in place of
    the committed file; the line its loader says."""
    rows = json.loads(references.REFERENCES_PATH.read_text())
    rows[3]["chips"] = 10**400
    path = tmp_path / "published_references.json"
    path.write_text(json.dumps(rows))
    monkeypatch.setattr(references, "REFERENCES_PATH", path)
    with pytest.raises(DataError) as caught:
        references.load()
    return str(caught.value)


@pytest.mark.parametrize("command", ["report", "fit"])
def test_a_bad_row_reaches_the_report_and_the_fit_as_the_loaders_one_line(
    tmp_path, monkeypatch, capsys, command
):
    import importlib

    main = importlib.import_module(f"experiments.cli.{command}").main
    records_file = REPO / "results" / "records.jsonl"
    said = _bad_references(tmp_path, monkeypatch)
    code = None
    try:
        code = main(
            [str(records_file), "--out", str(tmp_path)]
            if command == "report"
            else [str(records_file)]
        )
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines() == [err.strip().splitlines()[-1]], err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "REPORT.md").exists()


def test_an_overheads_file_without_the_launch_cost_is_one_line_from_the_fit(
    tmp_path, monkeypatch, capsys
):

    path = tmp_path / "published_overheads.json"
    path.write_text("[]")
    monkeypatch.setattr(references, "OVERHEADS_PATH", path)
    with pytest.raises(SystemExit) as stop:
        fit_cli.main([str(REPO / "results" / "records.jsonl")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "published_overheads.json has no row from" in err, err


def _scaling_row() -> dict:
    """A committed scaling row: NVIDIA's 8-GPU line with the 1-GPU line of its table."""
    row = next(r for r in references.load() if r.id == "dle-tf1-a100-tf32-x8")
    return dataclasses.asdict(row)


def test_a_scaling_row_gives_its_efficiency_from_its_two_quoted_lines(tmp_path):
    (loaded,) = _load_one(tmp_path, _scaling_row())
    assert (loaded.chips, loaded.one_chip_images_per_s) == (8, 909.0)
    assert loaded.images_per_s_per_chip * 8 == 7000.0  # the quoted total over 8 GPUs
    assert loaded.scaling_efficiency == pytest.approx(7000 / 8 / 909)
    # A row without the field is no scaling row: the field may be left out.
    (plain,) = _load_one(tmp_path, _valid_row())
    assert plain.one_chip_images_per_s is None and plain.scaling_efficiency is None


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"one_chip_images_per_s": 910.0}, "one_chip_images_per_s 910.0 is not a figure"),
        ({"images_per_s_per_chip": 876.0}, "images_per_s_per_chip x chips is 7008"),
        ({"held_out": None}, "a scaling row is held out of every fit"),
        ({"chips": 1}, "give chips of 2 or more"),
        ({"batch_per_chip": None}, "give chips of 2 or more, batch_per_chip"),
    ],
)
def test_a_scaling_row_that_its_quote_does_not_bear_out_is_refused(tmp_path, change, said):
    message = _refused(tmp_path, _scaling_row() | change)
    assert "'dle-tf1-a100-tf32-x8'" in message and said in message


def test_the_committed_scaling_rows_are_resnet50_pairs_of_one_table_each():
    rows = [r for r in references.load() if r.one_chip_images_per_s is not None]
    assert len(rows) == 20 and {r.model for r in rows} == {"resnet50"}
    assert all(r.held_out and "/729963dd47e7c8bd462ad10bfac7a7b0b604e6dd/" in r.source_url
               for r in rows)  # fmt: skip
    assert {r.chips for r in rows} == {2, 4, 8}
    # Predictable: every A100 row (tf32 and bf16 AMP) and the V100's fp32 rows; a V100
    # has no bf16, so its AMP rows are shown as published only.
    predictable = [r for r in rows if predictions.unpredictable(r) is None]
    assert len(predictable) == 14


def test_a_scaling_row_is_compiled_on_its_own_chips_and_its_base_on_one():
    (row,) = [r for r in references.load() if r.id == "dle-pyt-dgxa100-tf32-x8"]
    many = predictions.reference_workload(row)
    one = predictions.reference_workload(predictions.one_chip_of(row))
    assert (many.target, many.batch_size, many.strategy) == ("gpu-a100-80gbx8", 2048, "sharded")
    assert (one.target, one.batch_size, one.strategy) == ("gpu-a100-80gb", 256, "single")
    # Any other many-chip row is still priced by its chip's smallest target.
    (flax,) = [r for r in references.load() if r.id == "flax-v100x8-fp32"]
    assert predictions.reference_workload(flax).target == "gpu-v100"


def test_a_scaling_row_matches_only_a_compile_of_its_own_chip_count():
    (row,) = [r for r in references.load() if r.id == "dle-tf1-a100-tf32-x8"]

    def compiled(chips: int):
        return typed(
            compile_record(
                f"x{chips}",
                target={"name": f"gpu-a100x{chips}", "chips": chips, "devices": chips},
                kernels=[[1, "conv", 1e12, 0, "f32", 0]],
                workload={"model": "resnet50", "precision": "f32", "batch_size": 256 * chips},
            )
        )

    one, four, eight = compiled(1), compiled(4), compiled(8)
    assert predictions.match_reference(row, [one, four, eight]) is eight
    assert predictions.match_reference(row, [one, four]) is None
    assert predictions.match_reference(predictions.one_chip_of(row), [eight, one]) is one


def _compiled_mlp(chip: str, target: str, **overrides):
    return typed(
        compile_record(
            f"mlp {overrides}",
            target={"name": target, "chip": chip},
            device={"kind": chip},
            kernels=[[3, "gemm", 1e9, 1e7, "f32", 0]],
            kernels_source={"program": "train_step", "steps": 1},
            workload={"model": "mlp", "precision": "f32", "batch_size": 128,
                      "model_overrides": overrides},
        )
    )  # fmt: skip


def test_a_published_jax_loop_is_matched_at_its_width_and_predicted_by_the_loop_step():
    (row,) = [r for r in references.load() if r.id == "princeton-stax-mlp-a100"]
    assert row.model_overrides == {"width": 1024} and predictions.jax_loop(row)
    wide, default = _compiled_mlp("A100", "gpu-a100", width=1024), _compiled_mlp("A100", "gpu-a100")
    assert predictions.match_reference(row, [default, wide]) is wide
    assert predictions.match_reference(row, [default]) is None
    # The control: the same row at the model's own width matches the default's compile.
    plain = dataclasses.replace(row, model_overrides=None)
    assert predictions.match_reference(plain, [wide, default]) is default
    assert predictions.reference_workload(row).model_overrides == {"width": 1024}
    (v,) = predictions.versus_published([wide], [row])
    assert v["compared"] == "loop_step_s"
    assert v["predicted"] == pytest.approx(128 / v["block"]["loop_step_s"])
    # Another framework's loop of the same network is compared by its device step.
    keras = dataclasses.replace(row, framework="Keras 2 + TensorFlow 1.4")
    assert not predictions.jax_loop(keras)
    (k,) = predictions.versus_published([wide], [keras])
    assert "compared" not in k and k["predicted"] > v["predicted"]


def test_a_run_on_one_core_of_a_tpu_v2_is_compiled_and_matched_on_that_core():
    (row,) = [r for r in references.load() if r.id == "colab-flax-toy-mlp-tpuv2"]
    assert row.devices == 1 and predictions.jax_loop(row)
    core = predictions.reference_workload(row)
    assert (core.target, core.batch_size, core.strategy) == ("tpu-v2-1", 128, "single")
    # The control: the same row on its whole chips is the v2-8 slice's sharded program.
    whole = dataclasses.replace(row, devices=None)
    sliced = predictions.reference_workload(whole)
    assert (sliced.target, sliced.batch_size, sliced.strategy) == ("tpu-v2-8", 512, "sharded")

    def compiled(target: str, chips: int, devices: int):
        return typed(
            compile_record(
                target,
                target={"name": target, "platform": "tpu", "chip": "TPU v2", "chips": chips,
                        "devices": devices},
                device={"kind": "TPU v2"},
                kernels=[[3, "gemm", 1e6, 1e5, "f32", 0]],
                workload={"model": "toy_mlp", "precision": "f32", "batch_size": 128 * chips},
            )
        )  # fmt: skip

    one_core, slice_of_8 = compiled("tpu-v2-1", 1, 1), compiled("tpu-v2-8", 4, 8)
    assert predictions.match_reference(row, [slice_of_8, one_core]) is one_core
    assert predictions.match_reference(row, [slice_of_8]) is None
    assert predictions.match_reference(whole, [one_core, slice_of_8]) is slice_of_8
    assert predictions.match_reference(whole, [one_core]) is None


def test_devices_that_no_target_runs_on_are_refused(tmp_path):
    row = {**_valid_row(), "chip": "TPU v2", "devices": 3}
    assert _refused(tmp_path, row) == (
        "refs.json: row 'seed000-mx150-catsdogs': no target in jaxcnn.perf.chips.TARGETS runs "
        "a program on 3 device(s) of 1 TPU v2 chip(s): add one there, or leave devices out "
        "for a run on all of its chips' devices"
    )
    # The control: one core of one v2 chip is tpu-v2-1's.
    assert _load_one(tmp_path, {**row, "devices": 1})[0].devices == 1


def test_a_one_core_rows_observation_puts_its_whole_batch_on_that_core():
    from experiments import records
    from experiments.predict import observations

    (row,) = [r for r in references.load() if r.id == "colab-flax-cifar-cnn-tpuv2"]
    loaded = records.load(REPO / "results" / "references-tpu-v2")
    (found,), missing = observations.reference_observations([row], loaded)
    assert not missing and found.batch_per_device == 128
    # The control: the same program as a v2-8 slice's, 4 chips' batch over 8 cores.
    (one,) = [r for r in loaded if r.workload.model == "flax_cifar_cnn"]
    slice_of_8 = one.model_copy(
        update={
            "target": one.target.model_copy(update={"name": "tpu-v2-8", "chips": 4, "devices": 8}),
            "workload": one.workload.model_copy(update={"batch_size": 512}),
        }
    )
    whole = dataclasses.replace(row, devices=None)
    (found,), _ = observations.reference_observations([whole], [slice_of_8])
    assert found.batch_per_device == 64


def test_a_step_time_range_loads_with_its_fastest_end_as_the_step_time(tmp_path):
    row = {**_valid_row(), "step_time_s_range": [_valid_row()["step_time_s"], 2.0]}
    (loaded,) = _load_one(tmp_path, row)
    assert loaded.step_time_s_range == [row["step_time_s"], 2.0]
    # the committed: the seed's x86 CPU, given as 0.35-1.05 s a batch
    (cpu,) = [r for r in references.load() if r.id == "seed001-cpu-mnist-cnn"]
    assert cpu.step_time_s_range == [0.35, 1.05] and cpu.step_time_s == 0.35
    # the controls: a range whose fastest end is not the step time, or the wrong way round,
    # or not two numbers, is refused by id in one line
    for bad in ([1.0, 2.0], [row["step_time_s"], row["step_time_s"] / 2], [1.0], "1-2"):
        said = _refused(tmp_path, {**row, "step_time_s_range": bad})
        assert "'seed000-mx150-catsdogs'" in said and "step_time_s_range" in said, said
