import dataclasses
import subprocess
import sys
from pathlib import Path

import jax
import pytest
import xla_cache
from conftest import typed

from experiments import records
from experiments.cli import options as cli_options
from experiments.cli import plan as cli_plan
from experiments.cli import run as run_module
from experiments.cli.run import main
from experiments.harness import measure
from experiments.records.workload import Workload

TINY = ["--epochs", "1", "--set", "steps=3", "--set", "timing_steps=3", "--batch-size", "16"]
TINY += ["--set", "progress=false"]


def test_default_study_writes_one_valid_record_per_model(tmp_path, capsys):
    assert main(["--out", str(tmp_path), *TINY]) == 0
    loaded = records.load(tmp_path / "records.jsonl")
    assert [r.workload.model for r in loaded] == ["mnist_cnn", "lenet5_keras", "mlp"]
    for record in loaded:
        assert record.status == "ok"
        assert record.workload.dataset == "digits"
        assert (record.device.platform, record.device.count) == ("cpu", 1)
        assert record.step_time_s.n == 3
        assert record.history[0].steps == 3
        # jaxcnn's own loop in its windows of 3 steps, each window's one sync
        host, windows = record.host_loop, measure.HOST_LOOP_WINDOWS
        assert (host.steps, host.syncs, host.parts.wait.n) == (3 * windows, windows, windows)
        assert len(host.window_step_s) == windows
        parts = ("batch", "put", "dispatch", "metrics", "progress", "sync")
        assert {k: getattr(host.parts, k).n for k in parts} == dict.fromkeys(parts, 3 * windows)
        assert 0.0 <= record.test_accuracy <= 1.0
        # where the suite's runs share JAX's persistent compilation cache, the record says so
        assert record.env.compilation_cache is (True if xla_cache.ON else None)
    captured = capsys.readouterr()
    assert "images/s" in captured.out and "lenet5_keras" in captured.out
    # the device in words, and a line as each silent stretch begins
    assert "devices: cpu\n" in captured.err
    assert "[3/3] default: mlp on digits, batch 16" in captured.err
    assert captured.err.count("compiling the train and eval steps...") == 3


def test_by_default_records_go_to_the_users_own_ignored_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["--model", "mlp", "--set", "width=8", "--set", "checkpoints=false", *TINY]
    assert main(argv) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # not results/
    assert len(records.load(tmp_path / "runs" / records.RECORDS_FILE)) == 1
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", f"{records.DEFAULT_OUT}/records.jsonl"],
        cwd=Path(__file__).parent.parent,
    )
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0  # a user's runs never show up as changes to commit


def test_one_workload_with_model_overrides(tmp_path):
    assert main(["--out", str(tmp_path), "--model", "mlp", "--set", "width=16", *TINY]) == 0
    (record,) = records.load(tmp_path)
    assert record.workload.model_overrides == {"width": 16}
    assert (record.params.trainable, record.params.non_trainable) == (
        784 * 16 + 16 + 16 * 16 + 16 + 170,
        0,
    )


def test_summary_prints_the_layer_table(capsys):
    assert main(["--model", "lenet5_keras", "--summary"]) == 0
    assert "Total params: 81,194" in capsys.readouterr().out


# Bad input (flags, devices, data, --out) is tested in test_bad_input.py.


@pytest.mark.parametrize(
    "argv,loops",
    [
        ([], {"step"}),
        (["--model", "mlp", "--set", "loop=device"], {"device"}),
        (["--study", "speedrun"], {"device"}),
        (["--study", "bench", "--smoke"], {"step", "device"}),
        (["--study", "all"], {"step", "device"}),
    ],
)
def test_the_loops_a_command_will_run_are_known_before_jax_starts(argv, loops):
    # what the host memory policy is chosen from (jaxcnn/host_memory.py)
    assert cli_plan.loops(run_module.parse_args(argv)) == loops


@pytest.mark.parametrize(
    "argv,policy",
    [
        (["--study", "batch"], "system"),  # its steps' buffers are gigabytes
        (["--study", "all"], "system"),  # one study of them asks it
        (["--study", "bench"], "auto"),  # the control: a study that asks nothing
        (["--study", "batch", "--set", "host_memory=retain"], "retain"),  # the user's choice
    ],
)
def test_a_study_that_needs_the_system_allocator_gets_it_unless_the_user_chose(argv, policy):
    assert cli_plan.host_memory(run_module.parse_args(argv)) == policy


@pytest.mark.slow
@pytest.mark.parametrize("loop,policy", [("step", "retain"), ("device", "system")])
def test_module_entry_point_runs_as_a_user_would(tmp_path, loop, policy):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "--out",
            str(tmp_path),
            "--model",
            "mlp",
            "--set",
            "width=8",
            "--set",
            f"loop={loop}",
            *TINY,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "1 record(s) appended" in run.stdout
    # the last line names the next step, the report of those records
    assert run.stdout.splitlines()[-1].endswith(f"python -m experiments.report {tmp_path}/")
    (record,) = records.load(tmp_path)
    assert record.status == "ok"
    assert record.workload.loop == loop
    # a fresh process on the CPU: the host allocator was set before JAX started, to
    # `retain` for per-step dispatch and left to glibc for the compiled epoch
    assert record.env.host_memory.policy == policy
    assert record.env.host_memory.applied is (policy == "retain")


# --- the command as a user meets it ------------------------------------------------------

REPO = Path(__file__).parent.parent
ANSWERED_WITHOUT_JAX = [
    (["--help"], 0),
    (["--help-all"], 0),
    (["--model", "lenet6"], 2),
    (["--batch-size", "0"], 2),
    (["--set", "loop=async"], 2),
    (["--set", "timing-steps=5"], 2),
    (["--study", "bench", "--set", "loop=device"], 2),
    (["--target", "tpu-v5e-8", "--device", "cpu"], 2),
]
# A command that needs JAX to answer (is there a TPU?): the positive control, which
# shows the check below sees JAX when it is imported; then importing jaxcnn.train, which
# shows it sees Flax.
NEEDS_JAX = ["--device", "tpu", "--model", "mlp"]
_IMPORTS = """
import json, sys
from experiments.cli.run import main
loaded = lambda: sorted(m for m in ("flax", "jax") if m in sys.modules)
codes = [main(argv) for argv in json.loads(sys.argv[1])]
before = loaded()
codes.append(main(json.loads(sys.argv[2])))
after_control = loaded()
import jaxcnn.train
print(json.dumps({"codes": codes, "before": before, "after_control": after_control,
                  "after_train": loaded()}))
"""


@pytest.fixture(scope="module")
def imports():
    """What one fresh process answered to ANSWERED_WITHOUT_JAX and then NEEDS_JAX: their
    exit codes, its stderr, and which of Flax and JAX were imported before the control,
    after it, and after importing jaxcnn.train."""
    import json

    argvs = [argv for argv, _ in ANSWERED_WITHOUT_JAX]
    run = subprocess.run(
        [sys.executable, "-c", _IMPORTS, json.dumps(argvs), json.dumps(NEEDS_JAX)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return {**json.loads(run.stdout.splitlines()[-1]), "stderr": run.stderr}


def test_help_and_usage_errors_are_answered_and_the_control_imports_jax(imports):
    assert imports["codes"] == [code for _, code in ANSWERED_WITHOUT_JAX] + [2]
    assert "present: cpu" in imports["stderr"]  # the control's answer, from JAX
    assert "jax" in imports["after_control"]  # the control imported JAX, and the check saw it
    assert imports["after_train"] == ["flax", "jax"]  # and Flax, once a module needs it


def test_help_and_usage_errors_are_answered_without_importing_flax_or_jax(imports):
    # The names offered are the library's own (jaxcnn.choices, ...), read without either.
    assert imports["before"] == []


def test_help_shows_the_common_options_with_their_choices_and_the_exit_codes():
    import re

    shown = run_module.build_parser().format_help()
    flags = set(re.findall(r"^  (--[a-z-]+)", shown, re.MULTILINE)) - {"--help", "--help-all"}
    assert "--set" in flags and "--device" in flags and len(flags) <= 15
    for name in (*cli_options.MODELS, *cli_plan.study_choices(), *cli_options.STRATEGIES):
        assert name in shown
    assert "exit codes:" in shown and "143" in shown and "--force reruns" in shown
    every = run_module.settings_help()
    for name, setting in cli_options.SETTINGS.items():  # --help-all: each, with its value
        assert f"    {name}={setting.metavar}" in every


def test_set_gives_a_less_common_option_as_a_flag_would():
    options = run_module.parse_args(["--set", "timing_steps=50", "--set", "host_memory=system"])
    assert (options.timing_steps, options.host_memory) == (50, "system")
    assert run_module.parse_args([]).timing_steps == cli_options.SETTINGS["timing_steps"].default
    options = run_module.parse_args(["--set", "checkpoints=false", "--set", "width=8"])
    assert (options.checkpoints, options.width) == (False, 8)


def test_the_final_table_tells_every_workload_of_every_study_apart():
    options = run_module.parse_args(["--study", "all", "--smoke"])
    rows = []
    for w in cli_plan.workloads(options, "cpu", 8):
        device = {"platform": "cpu", "kind": "cpu", "count": w.num_devices or 8}
        device["process_count"] = 1
        record = {"workload": w.describe(), "device": device, "env": {}, "run_id": "a"}
        # skipped: a row with none of a run's figures, told apart by its workload alone
        record.update(schema_version=2, status="skipped", message="not run")
        rows.append(tuple(cli_plan.summary_row(typed(record))))
    assert len(set(rows)) == len(rows) > 20
    headers = cli_plan.SUMMARY_HEADERS
    assert {"study", "precision", "loop"} <= set(headers)
    study = [row[headers.index("study")] for row in rows]
    assert study[0] == "devices" and study[-1] == "roofline"


@pytest.mark.parametrize(
    "module",
    ["experiments.run", "experiments.cli.report", "experiments.cli.migrate", "benchmarks.peers"],
)
def test_every_command_says_a_usage_error_in_one_line(module, capsys):
    main_of = __import__(module, fromlist=["main"]).main
    try:
        code = main_of(["--bogus"])
    except SystemExit as exited:
        code = exited.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert err.endswith(" (see --help)\n")


def test_the_final_table_gives_a_matmul_its_side_and_rate_and_mlp_one_name():
    device = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1}
    matmul = {
        "workload": {
            "model": "matmul",
            "model_overrides": {},
            "kind": "matmul",
            "batch_size": 4096,
            "precision": "f32",
            "study": "matmul",
        },
        "device": device,
        "env": {},
        "schema_version": 2,
        "run_id": "a",
        "status": "ok",
        "params": {"trainable": 0, "non_trainable": 0},
        "compile_time_s": {"train": 1.0},
        "flops": {"per_step": 2 * 4096**3},
        "step_time_s": {"median": 0.5, "p10": 0.4, "p90": 0.6, "n": 20},
        "achieved_tflops": 0.275,
        "matmul": {"n": 4096, "dtype": "float32", "flops": 2 * 4096**3, "tflops": 0.275},
    }
    row = dict(zip(cli_plan.SUMMARY_HEADERS, cli_plan.summary_row(typed(matmul)), strict=True))
    assert (row["model"], row["batch"], row["FLOP/s"]) == ("matmul 4096x4096", "-", "275 G")
    w = Workload(model="mlp", batch_size=128, study="devices")
    default = dataclasses.replace(w, model_overrides={"width": 512})  # the default study's
    named = dataclasses.replace(w, model_overrides={})  # what --model=mlp gives
    wide = dataclasses.replace(w, model_overrides={"width": 4096})
    assert cli_plan.model_cell(default) == cli_plan.model_cell(named) == "mlp"
    assert cli_plan.model_cell(wide) == "mlp width=4096"  # positive control


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--modle=mlp"], "--modle=mlp (did you mean --model?)"),
        (["--mod=mlp"], "--mod=mlp (did you mean --model?)"),  # a prefix is not taken
        (["--strat", "pmap"], "--strat pmap (did you mean --strategy?)"),
        (["--bogus"], "--bogus"),  # nothing alike: no guess
    ],
)
def test_a_misspelled_or_shortened_flag_is_refused_with_the_closest_name(argv, said, capsys):
    assert run_module.main(argv) == 2
    assert capsys.readouterr().err == f"error: unrecognized arguments: {said} (see --help)\n"
    assert run_module.parse_args(["--model=mlp"]).model == "mlp"  # positive control


def test_the_report_tells_a_smoke_runs_record_by_the_environment_it_was_made_in(monkeypatch):
    from experiments.cli import report as report_cli

    def made(env):
        device = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1}
        record = {"workload": {}, "device": device, "env": env, "schema_version": 2}
        return typed({**record, "run_id": "a", "status": "skipped", "message": "not run"})

    monkeypatch.setenv(records.SMOKE_ENV, "1")
    assert report_cli.is_smoke(made(records.environment()))
    monkeypatch.delenv(records.SMOKE_ENV)
    assert not report_cli.is_smoke(made(records.environment()))  # the control


def test_a_compilation_cache_is_on_only_where_jax_has_a_folder_for_it(tmp_path):
    from experiments.harness import prepare

    folder = jax.config.jax_compilation_cache_dir
    assert prepare.compilation_cache_on() == xla_cache.ON  # the suite's own, where it has one
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        assert not prepare.compilation_cache_on()
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))  # the positive control
        assert prepare.compilation_cache_on()
    finally:
        jax.config.update("jax_compilation_cache_dir", folder)
