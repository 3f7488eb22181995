"""What each report plot draws, read from hand-made records: the series a plot's pure
function returns (labels, points, measured or predicted) and the artists of the figure
it draws from them (dashed predictions, dotted crossings and ideals)."""

import pytest
from test_report import CPU, _record
from test_report_targets import H100_TARGET, V5E_8, _compiled, _priced_by_one_memory_kernel

from experiments.studies import crossover, default, scaling

PARAMS = {64: 55_050, 256: 269_322, 1024: 1_863_690}


def _crossover_records(cpu_ms, target_ms=None, formulation="xla"):
    """The crossover study's CPU records at three widths, and the H100's compile records
    of the same widths (step `target_ms` each) where given."""
    rs, targets = [], []
    for width, ms in zip(PARAMS, cpu_ms, strict=True):
        r = _record(f"x{width}{formulation}", CPU, "mlp", 128, median=ms / 1e3, width=width)
        r["workload"].update(study="crossover", dataset="synthetic")
        r["params"]["trainable"] = PARAMS[width]
        r["formulation"] = {"name": formulation}
        rs.append(r)
        if target_ms is not None:
            c = _compiled(H100_TARGET, "mlp", 128, "ok", 0.5, step=target_ms / 1e3)
            c["workload"]["model_overrides"] = {"width": width}
            targets.append(c)
    return rs, targets


def _lines_by_label(ax):
    return {
        line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")
    }


def test_crossover_plot_draws_the_predicted_curve_dashed_and_marks_the_crossing(monkeypatch):
    rs, targets = _crossover_records((1.0, 4.0, 16.0), target_ms=2.0)
    _priced_by_one_memory_kernel(monkeypatch, "gpu", [(t, 2e-3) for t in targets])
    curves, crossings = crossover.crossover_curves(rs + targets)
    cpu_label = "cpu measured (xla formulation, step loop)"
    assert [(c.label, c.predicted) for c in curves] == [
        (cpu_label, False),
        ("gpu-h100 predicted", True),
    ]
    assert curves[0].points == tuple(
        (float(PARAMS[w]), ms / 1e3) for w, ms in zip(PARAMS, (1.0, 4.0, 16.0), strict=True)
    )
    assert curves[1].ys == pytest.approx([2e-3] * 3)
    # The CPU is 2x faster at 64 and 2x slower at 256: the crossing is their log midpoint.
    crossing = (PARAMS[64] * PARAMS[256]) ** 0.5
    assert [(c.slower, c.faster) for c in crossings] == [(cpu_label, "gpu-h100 predicted")]
    assert crossings[0].at == pytest.approx(crossing)
    fig = crossover.crossover_figure(curves, crossings)
    ax = fig.axes[0]
    lines = _lines_by_label(ax)
    assert lines[cpu_label].get_linestyle() == "-"
    assert lines["gpu-h100 predicted"].get_linestyle() == "--"
    assert len(lines["gpu-h100 predicted"].get_xdata()) == 3
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert [line.get_xdata()[0] for line in dotted] == pytest.approx([crossing])
    caption = crossover.crossover_caption(curves, crossings)
    assert f"gpu-h100 predicted is faster than {cpu_label} above {crossing:,.0f} params" in caption


def test_crossover_plot_says_why_there_is_no_crossing_and_keeps_formulations_apart(monkeypatch):
    xla, _ = _crossover_records((1.0, 4.0, 16.0))
    cpu, targets = _crossover_records((2.0, 5.0, 20.0), target_ms=0.5, formulation="cpu")
    _priced_by_one_memory_kernel(monkeypatch, "gpu", [(t, 5e-4) for t in targets])
    curves, crossings = crossover.crossover_curves(xla + cpu + targets)
    # Two formulations: two measured curves of three points each, not one zigzag of six.
    measured = [c for c in curves if not c.predicted]
    assert [(c.label, len(c.points)) for c in measured] == [
        ("cpu measured (cpu formulation, step loop)", 3),
        ("cpu measured (xla formulation, step loop)", 3),
    ]
    assert [c.at for c in crossings] == [None, None]
    caption = crossover.crossover_caption(curves, crossings)
    assert (
        "no crossing: gpu-h100 predicted is faster at every width than "
        "cpu measured (xla formulation, step loop)" in caption
    )
    ax = crossover.crossover_figure(curves, crossings).axes[0]
    assert not [line for line in ax.get_lines() if line.get_linestyle() == ":"]


def test_crossover_plot_leaves_a_roofline_bound_out():
    rs, targets = _crossover_records((1.0, 4.0, 16.0), target_ms=2.0)  # no kernels
    curves, crossings = crossover.crossover_curves(rs + targets)
    assert [c.predicted for c in curves] == [False] and crossings == []
    assert "no accelerator curve" in crossover.crossover_caption(curves, crossings)


def _scaling_records():
    measured = _record("s1", CPU, "mlp", 128, median=0.05, width=1024)
    measured["workload"].update(study="scaling", scaling="weak", dataset="synthetic")
    v5e_1 = {**V5E_8, "name": "tpu-v5e-1", "chips": 1, "topology": "v5e:1x1"}
    v5e_16 = {**V5E_8, "name": "tpu-v5e-16", "chips": 16, "topology": "v5e:4x4"}
    compiled = [
        _compiled(v5e_1, "mlp", 16, "ok", 0.25, step=1e-3),
        _compiled(V5E_8, "mlp", 128, "ok", 0.3, step=1.25e-3),
        _compiled(v5e_16, "mlp", 256, "ok", 0.3, step=1.25e-3),
        _compiled(V5E_8, "mlp", 256, "ok", 0.3, step=2e-3),  # 32 per chip: one count only
    ]
    for r in compiled:
        r["workload"]["model_overrides"] = {"width": 1024}
    return measured, compiled


def test_scaling_plot_draws_predicted_curves_over_chip_counts_with_their_ideal(monkeypatch):
    measured, compiled = _scaling_records()
    steps = [(compiled[0], 1e-3), (compiled[1], 1.25e-3), (compiled[2], 1.25e-3)]
    _priced_by_one_memory_kernel(monkeypatch, "tpu", [*steps, (compiled[3], 2e-3)])
    panels = scaling.scaling_curves([measured, *compiled])
    assert list(panels) == ["mlp width=1024"]
    curves = panels["mlp width=1024"]
    assert [(c.label, c.predicted) for c in curves] == [
        ("cpu single, 128/device, measured", False),
        ("TPU v5e, 16/chip, predicted", True),
    ]
    assert curves[0].points == ((1.0, 128 / 0.05),)
    predicted = curves[1]
    assert predicted.xs == [1, 8, 16]
    assert predicted.ys == pytest.approx([16 / 1e-3, 128 / 1.25e-3, 256 / 1.25e-3])
    ax = scaling.scaling_figure(panels).axes[0]
    lines = _lines_by_label(ax)
    assert lines["TPU v5e, 16/chip, predicted"].get_linestyle() == "--"
    assert lines["cpu single, 128/device, measured"].get_linestyle() == "None"  # one point
    ideal = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(ideal) == 1
    assert list(ideal[0].get_ydata()) == pytest.approx([16e3, 8 * 16e3, 16 * 16e3])
    caption = scaling.scaling_caption(panels, multi_gpu=False)
    assert "mlp width=1024 on TPU v5e: 80% of ideal at 16 chips against 1 (predicted)" in caption
    assert "no multi-GPU target compiled yet" in caption


def test_scaling_plot_compares_device_sides_where_one_count_lacks_the_hosts(monkeypatch):
    measured, compiled = _scaling_records()
    steps = [(compiled[0], 1e-3), (compiled[1], 1.25e-3), (compiled[2], 1.25e-3)]
    _priced_by_one_memory_kernel(monkeypatch, "tpu", steps)
    from experiments.studies import targets

    real = targets.prediction

    def one_chip_has_a_host_side(record):
        block = real(record)
        if record["target"]["chips"] == 1:  # 0.5 ms of dispatch on top of its kernels
            step = block["step_time_s"] + 5e-4
            block.update(step_time_s=step, images_per_s=16 / step, host_s=5e-4)
            block["host_left_out"] = []
        else:
            block["host_left_out"] = ["dispatch (not measured for this placement)"]
        return block

    monkeypatch.setattr(scaling, "prediction", one_chip_has_a_host_side)
    curve = scaling.scaling_curves([measured, *compiled])["mlp width=1024"][1]
    assert curve.label == "TPU v5e, 16/chip (device side only), predicted"
    assert curve.ys == pytest.approx([16 / 1e-3, 128 / 1.25e-3, 256 / 1.25e-3])


def _default(run_id, batch, study=None, formulation="xla"):
    r = _record(run_id, CPU, "mnist_cnn", batch, median=batch / 1000)
    r["workload"]["study"] = study
    r["formulation"] = {"name": formulation}
    return r


def test_throughput_plot_joins_no_two_unrelated_runs(tmp_path):
    # Two single --model runs at two batches: two points, no line between them.
    series = default.throughput_series([_default("a1", 64), _default("a22", 128)])
    assert [len(rs) for rs in series.values()] == [1, 1]
    assert all("a run of its own" in label for label in series)
    # A positive control: the default study's two batches, run the same way, are one line;
    # the same study run with another formulation is another line.
    rs = [
        _default("d1", 64, "default"),
        _default("d22", 128, "default"),
        _default("d333", 128, "default", formulation="cpu"),
    ]
    series = default.throughput_series(rs)
    assert {label: [r["workload"]["batch_size"] for r in v] for label, v in series.items()} == {
        "mnist_cnn on cpu, f32, default study": [64, 128],
        "mnist_cnn [cpu formulation] on cpu, f32, default study": [128],
    }
    text, paths = default.throughput_vs_batch(rs, tmp_path)
    assert paths == [tmp_path / "images_per_s_vs_batch.png"]
    assert "a single --model run is a point of its own" in text


def _precision(run_id, precision, acc, epochs=1):
    r = _record(run_id, CPU, "mnist_cnn", 128, median=0.09)
    r["workload"].update(study="precision", dataset="mnist", precision=precision, epochs=epochs)
    r["test_accuracy"] = acc
    r["history"] = [
        {"epoch": e + 1, "test_accuracy": acc - 0.01 * (epochs - e - 1)} for e in range(epochs)
    ]
    return r


def test_precision_plot_shows_one_epochs_test_error_from_zero_with_its_spread():
    from experiments.studies import precision

    rs = [_precision("p1", "f32", 0.9837), _precision("p22", "bf16", 0.9853)]
    bars = precision.test_error_bars(rs)
    assert [(name, round(error, 4)) for name, error, _ in bars] == [
        ("cpu: mnist_cnn f32, matmul default", 0.0163),
        ("cpu: mnist_cnn bf16, matmul default", 0.0147),
    ]
    # +-1.96 sqrt(p (1 - p) / 10,000): MNIST's test images
    assert [half for _, _, half in bars] == pytest.approx(
        [1.96 * (0.0163 * 0.9837 / 10_000) ** 0.5, 1.96 * (0.0147 * 0.9853 / 10_000) ** 0.5]
    )
    acc_ax = precision.precision_figure(rs).axes[1]
    assert acc_ax.get_xlim()[0] == 0  # bars from 0: no stretched 0.0016 range
    assert [p.get_x() for p in acc_ax.patches] == [0, 0]
    assert [p.get_width() for p in acc_ax.patches] == pytest.approx([1.63, 1.47])
    assert acc_ax.get_legend() is None and not acc_ax.get_lines()
    assert "epoch" not in acc_ax.get_xlabel()


def test_precision_plot_draws_several_epochs_per_epoch_with_the_legend_off_the_data():
    from experiments.studies import precision

    rs = [_precision("p1", "f32", 0.99, epochs=3), _precision("p22", "bf16", 0.98, epochs=3)]
    acc_ax = precision.precision_figure(rs).axes[1]
    assert [list(line.get_xdata()) for line in acc_ax.get_lines()] == [[1, 2, 3], [1, 2, 3]]
    anchor = acc_ax.get_legend().get_bbox_to_anchor().transformed(acc_ax.transAxes.inverted())
    assert anchor.y1 < 0  # under the axes


def test_bench_plot_is_a_grid_a_row_per_machine_a_column_per_model_one_legend():
    from test_report_bench import _bench, _on

    from experiments.studies import bench

    rs = []
    for cpu, extensions in (("AMD EPYC", ["avx2"]), ("Intel Xeon", ["avx2"])):
        for model in ("mnist_cnn", "lenet5_keras", "mlp"):
            for batch, rate in ((32, 1000.0), (128, 2000.0)):
                for r in (
                    _bench(f"{cpu}{model}{batch}", rate, batch=batch),
                    _bench(f"{cpu}{model}{batch}t", rate / 2, batch=batch, framework="torch",
                           mode="eager"),
                ):  # fmt: skip
                    r["workload"]["model"] = model
                    rs.append(_on(r, cpu, extensions))
    groups = bench._groups(rs)
    panels = bench.bench_panels(groups)
    assert len(panels) == 6
    key = ("cpu", "AMD EPYC (avx2)", "mlp")
    assert panels[key] == {
        "jax cpu device f32": [(32, 1000.0), (128, 2000.0)],
        "torch eager": [(32, 500.0), (128, 1000.0)],
    }
    fig = bench.bench_figure(panels, bench._configs(groups))
    grid = fig.axes[0].get_gridspec()
    assert (grid.nrows, grid.ncols) == (2, 3)  # not a 1 x 6 strip
    width, height = fig.get_size_inches() * 100
    assert width <= 1400 and height <= 1000
    assert [ax.get_legend() for ax in fig.axes] == [None] * 6 and len(fig.legends) == 1
    styles = {line.get_label(): line.get_linestyle() for line in fig.axes[0].get_lines()}
    assert styles == {"jax cpu device f32": "-", "torch eager": "--"}
    one_colour = {
        name: {
            str(line.get_color())
            for ax in fig.axes
            for line in ax.get_lines()
            if line.get_label() == name
        }
        for name in styles
    }
    assert all(len(c) == 1 for c in one_colour.values())  # one colour per configuration


def test_targets_memory_is_one_plot_per_model_linked_from_its_page_with_the_usable_line(tmp_path):
    from test_report_targets import MX150

    from experiments.studies import targets

    v5e_1 = {**V5E_8, "name": "tpu-v5e-1", "chips": 1, "topology": "v5e:1x1"}
    rs = [
        _compiled(MX150, "catsdogs_cnn", 16, "ok", 1.0),
        _compiled(MX150, "catsdogs_cnn", 32, "oom", 1.75),
        _compiled(MX150, "catsdogs_cnn", 16, "ok", 0.75, precision="bf16"),
        _compiled(v5e_1, "catsdogs_cnn", 16, "ok", 1.0),
        _compiled(v5e_1, "catsdogs_cnn", 32, "ok", 2.0),
        _compiled(v5e_1, "mnist_cnn", 16, "ok", 0.5),  # one batch: nothing over batch to draw
    ]
    for r in rs:  # the records of older runs carry no usable memory: the same rule fills it
        r["target"] = {k: v for k, v in r["target"].items() if k != "usable_bytes_per_device"}
    grouped = targets._by_model(targets.compiled(rs))
    panels = targets.memory_lines(grouped["catsdogs_cnn"])
    assert list(panels) == ["GPU", "TPU"]
    assert [(x.target, x.precision, x.points, x.usable) for x in panels["GPU"]] == [
        ("gpu-mx150", "f32", ((16, 1.0), (32, 1.75)), 1.5),  # 75% of the MX150's 2 GiB
        ("gpu-mx150", "bf16", ((16, 0.75),), 1.5),
    ]
    assert [x.usable for x in panels["TPU"]] == [16.0]  # a TPU's whole HBM
    fig = targets.memory_figure("catsdogs_cnn", panels)
    gpu_ax = fig.axes[0]
    usable = [line for line in gpu_ax.get_lines() if line.get_linestyle() == ":"]
    assert [list(line.get_ydata()) for line in usable] == [[1.5, 1.5]]
    styles = [line.get_linestyle() for line in gpu_ax.get_lines() if line not in usable]
    assert styles == ["-", "--"]
    legend = gpu_ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["gpu-mx150 (usable 1.5 GiB)"]
    box = legend.get_bbox_to_anchor().transformed(gpu_ax.transAxes.inverted())
    assert box.x0 > 1  # beside the axes, off the data
    _, paths = targets.targets_section(rs, tmp_path)
    assert [p.name for p in paths] == ["targets_memory_catsdogs_cnn.png"]
    pages = targets.model_pages(rs)
    assert (
        "![catsdogs_cnn: memory per chip per target](../targets_memory_catsdogs_cnn.png)"
        in (pages["targets-catsdogs_cnn"])
    )
    assert "targets_memory" not in pages["targets-mnist_cnn"]


def test_precision_section_says_what_its_bars_and_whiskers_are(tmp_path):
    from experiments.studies import precision

    rs = [_precision("p1", "f32", 0.9837), _precision("p22", "bf16", 0.9853)]
    text, paths = precision.precision_study(rs, tmp_path)
    assert paths == [tmp_path / "study_precision.png"]
    assert "Left: ms/step, median, whiskers p10-p90. Right: test error after the run's one" in text
    assert "95% binomial interval of an error rate measured on that many test images" in text


def test_batch_plot_joins_a_batch_sweep_only_where_its_runs_share_host_and_placement():
    from experiments.studies import batch

    def run(run_id, size, host="a", strategy="single"):
        r = _default(run_id, size, "batch")
        r["device"]["host"], r["workload"]["strategy"] = host, strategy
        return r

    # Positive control: one host's sweep, run the same way, is one line.
    same = batch._batch_groups([run("b1", 8), run("b22", 16)])
    assert [[r["workload"]["batch_size"] for r in rs] for rs in same.values()] == [[8, 16]]
    # Another machine's or another placement's run of the next batch is a line of its own.
    apart = batch._batch_groups(
        [run("b1", 8), run("b22", 16, host="b"), run("b3", 32, strategy="pmap")]
    )
    assert sorted(len(rs) for rs in apart.values()) == [1, 1, 1]
