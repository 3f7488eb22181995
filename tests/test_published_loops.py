"""A published JAX loop is predicted from its own shape: its input pipeline replayed
(benchmarks/published_inputs.py, records of kind input), its calls and syncs; the replay
itself writes real records."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

from benchmarks import published_inputs
from experiments import records
from experiments.predict import published_loops, references
from experiments.predict import shown as predictions

RESULTS = Path(__file__).resolve().parents[1] / "results"
CIFAR, TOY = "colab-flax-cifar-cnn-tpuv2", "colab-flax-toy-mlp-tpuv2"
SKYPILOT = "skypilot-flax-mnist-cnn-tpuv2"
# ray-jax-tpu-pod-demos on a TPU v2-32: one process a host over ssh, one Ray task a host
RAYPOD, RAYPOD_RAY = "raypod-flax-mnist-mlp-tpuv2", "raypod-ray-flax-mnist-mlp-tpuv2"
STAX = ["--pipelines", "stax-mnist", "--epochs", "3"]


@pytest.fixture(scope="module")
def committed():
    """The committed TPU v2 compile records and input replays, and the references."""
    loaded = records.load(RESULTS / "references-tpu-v2", RESULTS / "references-inputs")
    return loaded, {r.id: r for r in references.load()}


def _versus(loaded, ref):
    (v,) = predictions.versus_published(loaded, [ref])
    return v


def _with_input(replay, **changed):
    return replay.model_copy(update={"input": replay.input.model_copy(update=changed)})


def test_a_worker_fed_loop_waits_only_for_what_its_workers_take_beyond_its_own_work(committed):
    loaded, refs = committed
    v = _versus(loaded, refs[CIFAR])
    parts, replay = (
        v["block"]["loop_parts"],
        published_loops.replayed("colab-cifar-augmented", loaded),
    )
    per_batch = replay.input.batch_s.median
    assert replay.input.workers_published == 2
    own = sum(s or 0.0 for p, s in parts.items() if p not in ("batch", "transfer"))
    # workers run beside the loop's thread: the host side is the longer of the two
    assert parts["batch"] == pytest.approx(max(0.0, per_batch - own))
    assert v["block"]["loop_bound"] == "host"
    assert v["block"]["loop_step_s"] >= per_batch
    assert "colab-cifar-augmented replayed on" in v["block"]["input"]
    assert "2 calls a step" in v["block"]["input"]


def test_a_loop_that_loads_in_its_own_thread_adds_the_whole_replay(committed):
    loaded, refs = committed
    v = _versus(loaded, refs[TOY])
    replay = published_loops.replayed("colab-toy-points", loaded)
    assert replay.input.workers_published == 0
    assert v["block"]["loop_parts"]["batch"] == replay.input.batch_s.median
    # twice its replay's time a batch: twice the input part, the rest unchanged
    slower = _with_input(
        replay,
        batch_s=replay.input.batch_s.model_copy(update={"median": 2 * replay.input.batch_s.median}),
    )
    others = [r for r in loaded if r is not replay]
    w = _versus([*others, slower], refs[TOY])
    assert w["block"]["loop_parts"]["batch"] == 2 * replay.input.batch_s.median
    assert w["block"]["loop_step_s"] > v["block"]["loop_step_s"]


def test_a_replay_on_fewer_workers_than_published_is_scaled_to_the_published_count(committed):
    loaded, _ = committed
    replay = published_loops.replayed("colab-cifar-augmented", loaded)
    median = replay.input.batch_s.median
    assert published_loops.batch_seconds(replay) == median  # replayed at its own count
    fewer = _with_input(replay, workers=2, workers_published=8)
    assert published_loops.batch_seconds(fewer) == pytest.approx(median * 2 / 8)


def test_a_loop_that_slices_host_arrays_is_priced_at_its_own_bytes_and_calls(committed):
    from jaxcnn import host_loop
    from jaxcnn.perf import predict

    loaded, refs = committed
    ref = refs[SKYPILOT]  # Flax's MNIST example: images on the device, labels from NumPy
    assert ref.loop.input is None and ref.loop.batch_bytes == 1024
    v = _versus(loaded, ref)
    parts = v["block"]["loop_parts"]
    want = host_loop.modelled_parts(1024, 3, predict.constants(), "tpu")
    assert (parts["batch"], parts["put"], parts["dispatch"]) == (
        want["batch"],
        want["put"],
        want["dispatch"],
    )
    assert "3 calls a step, host arrays sliced" in v["block"]["input"]
    # the control: the same loop slicing a whole float32 MNIST batch from the host puts more
    bigger = dataclasses.replace(ref, loop=dataclasses.replace(ref.loop, batch_bytes=401_408))
    assert _versus(loaded, bigger)["block"]["loop_parts"]["put"] > parts["put"]


def test_a_loop_on_many_hosts_is_predicted_from_one_hosts_program_at_its_batch(committed):
    """A v2-32's loop (16 chips, 4 hosts of 4) runs one host's share on each host: it is
    predicted from tpu-v2-8 (4 chips) at 4 chips' batch, its put at the host's bytes."""
    loaded, refs = committed
    for rid, host_batch, host_bytes in ((RAYPOD, 5000, 15_700_000), (RAYPOD_RAY, 256, 803_840)):
        ref = refs[rid]
        assert (ref.chips, ref.devices, ref.loop.calls_per_step) == (16, None, 1)
        assert ref.loop.batch_bytes == host_bytes == host_batch * (784 + 1) * 4
        v = _versus(loaded, ref)
        assert (v["record"].target.name, v["record"].workload.batch_size) == (
            "tpu-v2-8",
            host_batch,
        )
        parts = v["block"]["loop_parts"]
        assert v["block"]["loop_step_s"] > v["block"]["device_step_s"]
        # each of the host's 8 cores' share over its chip's PCIe (a TPU's 16 GB/s)
        assert parts["transfer"] == pytest.approx(host_bytes / 8 / 1.6e10)
        assert "transfer" not in v["block"]["loop_left_out"]
        # its slices are views: nothing gathered on the host, the put copies them
        assert ref.loop.views and parts["batch"] == 0.0 and parts["put"] > 0
        # the control: the same loop gathering its rows as jaxcnn's does pays for it
        gathers = dataclasses.replace(ref, loop=dataclasses.replace(ref.loop, views=False))
        assert _versus(loaded, gathers)["block"]["loop_parts"]["batch"] > 0
    # the control: the same loop slicing fewer bytes puts less
    small = _versus(loaded, refs[RAYPOD_RAY])["block"]["loop_parts"]["put"]
    assert small < _versus(loaded, refs[RAYPOD])["block"]["loop_parts"]["put"]


def test_a_pipeline_never_replayed_is_named_left_out_not_counted_free(committed):
    loaded, refs = committed
    without = [r for r in loaded if not isinstance(r, records.InputRecord)]
    v = _versus(without, refs[CIFAR])
    assert v["block"]["loop_parts"]["batch"] is None
    assert "batch" in v["block"]["loop_left_out"]
    assert (
        "python -m benchmarks.published_inputs --pipelines colab-cifar-augmented"
        in (v["block"]["input"])
    )
    # the control: with its replay the part has a figure
    assert "batch" not in _versus(loaded, refs[CIFAR])["block"]["loop_left_out"]


def test_jaxcnns_own_bookkeeping_is_not_charged_to_a_published_loop(committed):
    loaded, refs = committed
    parts = _versus(loaded, refs[TOY])["block"]["loop_parts"]
    assert all(parts[p] == 0.0 for p in published_loops.NOT_IN_THESE_LOOPS)


def test_a_loop_names_its_input_or_the_bytes_it_slices_not_both(tmp_path):
    rows = [r for r in references._rows(references.REFERENCES_PATH) if r["id"] == TOY]
    for loop, said in [
        (
            {"calls_per_step": 2, "syncs_every": 63, "input": "x", "batch_bytes": 10},
            "one of the two",
        ),
        ({"calls_per_step": 2, "syncs_every": 63}, "one of the two"),
        (
            {"calls_per_step": 0, "syncs_every": 63, "input": "x"},
            "calls_per_step must be a positive",
        ),
        ({"calls_per_step": 2, "syncs": 63, "input": "x"}, "unknown field(s) syncs"),
        (
            {"calls_per_step": 2, "syncs_every": 63, "input": "x", "views": True},
            "give it with batch_bytes, not with an input pipeline",
        ),
    ]:
        path = tmp_path / "refs.json"
        path.write_text(references.json.dumps([{**rows[0], "loop": loop}]))
        with pytest.raises(references.DataError, match=re.escape(said)):
            references.load(path)
    # the control: views with the bytes it slices loads
    path.write_text(references.json.dumps([{**rows[0], "loop": {
        "calls_per_step": 2, "syncs_every": 63, "batch_bytes": 10, "views": True}}]))  # fmt: skip
    assert references.load(path)[0].loop.views


def test_the_numpy_replay_writes_a_record_the_reader_types(tmp_path, capsys):
    assert published_inputs.main([*STAX, "--out", str(tmp_path)]) == 0
    (record,) = records.load(tmp_path)
    assert isinstance(record, records.InputRecord) and record.status == "ok"
    timed = record.input
    assert timed.batches == 469 and timed.batch_s.n == 3 and timed.workers == 0
    assert timed.batch_bytes == 128 * (784 + 10) * 4  # float32 images and one-hot labels
    assert "stax-mnist:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--epochs", "2", "--pipelines", "stax-mnist"], "--epochs 2: must be >= 3"),
        (["--pipelines", "nope"], "nope"),
    ],
)
def test_a_bad_replay_command_is_refused_before_any_work(argv, said, tmp_path, capsys):
    assert published_inputs.main([*argv, "--out", str(tmp_path)]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / records.RECORDS_FILE).exists()


@pytest.mark.parametrize(
    "pipeline, absent, said",
    [
        ("colab-toy-points", ("torch", "torchvision"), published_inputs.REQUIREMENTS),
        ("jia-tfds-mnist", ("tensorflow",), published_inputs.REQUIREMENTS_TF),
        ("lwcookbook-cifar", ("flax",), "needs flax: pip install -e ."),
    ],
)
def test_a_pipeline_without_its_modules_names_the_install_line(
    pipeline, absent, said, tmp_path, capsys, monkeypatch
):
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in absent else found(name, *a)
    )
    assert published_inputs.main(["--pipelines", pipeline, "--out", str(tmp_path)]) == 2
    assert said in capsys.readouterr().err
    # the control: the NumPy pipeline needs neither
    assert published_inputs.main([*STAX, "--out", str(tmp_path)]) == 0
