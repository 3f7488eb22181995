"""The Colab/Kaggle notebook: well-formed, regenerable, and it runs end to end on CPU.

The execution test treats a fresh virtual environment as "the runtime": it sees this
environment's packages (as a Colab runtime has its preinstalled jax), but the
notebook's `pip install` writes into its own folder, so the shared environment is never
modified. The kernel runs in that environment with the parameters injected after the
parameters cell, as papermill does, and installs the local checkout offline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import jax
import nbformat
import pytest

from experiments import records as records_lib
from experiments.cli import run as run_cli

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "colab" / "jaxcnn_study.ipynb"
sys.path.insert(0, str(REPO / "colab"))
import make_notebook  # noqa: E402  (colab/ is a folder of scripts, not a package)

# The three-model default study at toy size (--smoke): small enough for the suite.
STUDY = "default"
STUDY_MODELS = ["lenet5_keras", "mlp", "mnist_cnn"]


def tagged(notebook: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    return [c for c in notebook.cells if tag in c.get("metadata", {}).get("tags", [])]


def cell_source(tag: str) -> str:
    (cell,) = tagged(nbformat.read(NOTEBOOK, as_version=4), tag)
    return cell.source


def test_notebook_is_valid_with_one_parameters_cell_and_no_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    assert len(tagged(notebook, "parameters")) == 1
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert notebook.cells[0].cell_type == "markdown"
    assert make_notebook.ARCHIVE_COMMAND in notebook.cells[0].source  # how to make SOURCE


def test_committed_notebook_is_what_make_notebook_writes():
    assert NOTEBOOK.read_text(encoding="utf-8") == make_notebook.render(), (
        "colab/jaxcnn_study.ipynb is stale: run python colab/make_notebook.py"
    )


def test_notebook_calls_the_package_and_copies_no_model_code():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    for copied in ("nn.Module", "nn.Conv", "value_and_grad", "optax.", "def train_step"):
        assert copied not in code
    assert "experiments.run" in code and "devices.resolve" in code


def _install_namespace(**parameters) -> dict:
    namespace = {"Path": Path, "sys": sys, "INSTALL": False, **parameters}
    exec(cell_source("install"), namespace)
    return namespace


def test_install_command_pins_the_runtime_jax_and_handles_both_sources(tmp_path):
    ns = _install_namespace()
    pins = ns["jax_constraints"]()
    assert f"jax=={jax.__version__}" in pins
    assert f"jaxlib=={jax.lib.__version__}" in pins

    constraints = tmp_path / "c.txt"
    ns["runtime_can_build"] = lambda: True  # Colab's and Kaggle's setuptools can
    local = ns["pip_install_command"](str(REPO), "main", constraints)
    assert local[:6] == [sys.executable, "-m", "pip", "install", "-c", str(constraints)]
    assert local[6:] == ["--no-build-isolation", "-e", str(REPO)]
    ns["runtime_can_build"] = lambda: False  # pip fetches build tools from its index
    assert ns["pip_install_command"](str(REPO), "", constraints)[6:] == ["-e", str(REPO)]

    url = "https://github.com/someone/jaxcnn"
    git = ns["pip_install_command"](url, "v1", constraints, ["--quiet"])
    assert git[6:] == [f"jaxcnn @ git+{url}@v1", "--quiet"]
    git_plus = ns["pip_install_command"](f"git+{url}", "", constraints)
    assert git_plus[-1] == f"jaxcnn @ git+{url}"

    with pytest.raises(ValueError, match="placeholder"):
        ns["pip_install_command"](make_notebook.PLACEHOLDER_URL, "main", constraints)
    with pytest.raises(ValueError, match="neither a folder or archive"):
        ns["pip_install_command"](str(tmp_path / "missing"), "main", constraints)
    for name in ("jaxcnn-0.1.0-py3-none-any.whl", "jaxcnn.zip", "jaxcnn-0.1.0.tar.gz"):
        (tmp_path / name).write_bytes(b"")
        archive = ns["pip_install_command"](str(tmp_path / name), "main", constraints)
        assert archive[6:] == [str(tmp_path / name)]


def test_source_auto_finds_what_was_uploaded_or_says_how_to_make_it(tmp_path):
    ns = _install_namespace()
    content, kaggle = tmp_path / "content", tmp_path / "kaggle-input"
    (content / "sample_data").mkdir(parents=True)  # what a Colab runtime holds
    (kaggle / "other-dataset").mkdir(parents=True)
    ns["UPLOAD_FOLDERS"] = (content, kaggle, tmp_path / "absent")
    with pytest.raises(ValueError, match="found no jaxcnn") as nothing:
        ns["find_source"](ns["UPLOAD_FOLDERS"])
    assert make_notebook.ARCHIVE_COMMAND in str(nothing.value)  # the line says how
    # A Kaggle dataset holding a checkout, two levels down
    checkout = kaggle / "jaxcnn-source" / "jaxcnn-main"
    checkout.mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "jaxcnn"\n')
    assert ns["find_source"](ns["UPLOAD_FOLDERS"]) == str(checkout)
    # An archive uploaded to Colab's folder comes first; pip installs that file
    (content / "jaxcnn.zip").write_bytes(b"")
    assert ns["find_source"](ns["UPLOAD_FOLDERS"]) == str(content / "jaxcnn.zip")
    command = ns["pip_install_command"]("auto", "main", tmp_path / "c.txt")
    assert command[6:] == [str(content / "jaxcnn.zip")]
    assert 'SOURCE = "auto"' in cell_source("parameters")  # the default needs no edit


def test_the_last_cell_packs_records_report_and_plots_and_says_where_they_go(tmp_path):
    out = tmp_path / "out"
    for name in ("records.jsonl", "REPORT.md", "report/devices.md", "plot.png",
                 "checkpoints/run/state.json", "checkpoints/run/x.jsonl"):  # fmt: skip
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(name)
    namespace = {"OUT": out, "ON_COLAB": False, "ON_KAGGLE": False}
    exec(cell_source("download"), namespace)
    import zipfile

    with zipfile.ZipFile(out / "jaxcnn_results.zip") as packed:
        assert sorted(packed.namelist()) == [
            "REPORT.md", "plot.png", "records.jsonl", "report/devices.md"
        ]  # fmt: skip
        assert packed.read("records.jsonl") == b"records.jsonl"


def test_results_default_to_persistent_storage():
    # Drive on Colab (mounted by default, asking once); Kaggle's kept output folder
    assert "MOUNT_DRIVE = True" in cell_source("parameters")
    where = cell_source("where")
    assert 'OUT = DRIVE / "jaxcnn_results"' in where
    assert 'OUT = Path("/kaggle/working/jaxcnn_results")' in where


def test_runtime_can_build_follows_setuptools_and_wheel():
    """pyproject.toml asks for setuptools >= 68; before 70.1 it builds wheels only with
    `wheel` installed: then pip needs an index for build tools."""
    ns = _install_namespace()
    for setuptools, wheel, expected in [
        ((70, 1), None, True),
        ((80, 0), None, True),
        ((70, 0), None, False),
        ((70, 0), (0, 45), True),
        ((68, 0), (0, 45), True),
        ((67, 8), (0, 45), False),
        (None, (0, 45), False),
    ]:
        versions = {"setuptools": setuptools, "wheel": wheel}
        ns["_version"] = versions.get
        assert ns["runtime_can_build"]() is expected, versions


def _commands(tag: str, envs: list | None = None, **parameters) -> list[list[str]]:
    """The commands the `tag` cell runs (nothing runs): the parameters cell's defaults,
    then `parameters`; each command's environment appended to `envs`."""
    commands = []

    def run_live(command, env=None):
        commands.append([str(part) for part in command])
        if envs is not None:
            envs.append(env)
        return 0

    namespace = {"os": os, "sys": sys, "re": re, "Path": Path}
    exec(cell_source("parameters"), namespace)
    namespace.update(parameters, run_live=run_live)
    exec(cell_source(tag), namespace)
    return commands


def test_run_and_predict_cells_call_the_cli_with_flags_it_has(tmp_path):
    run = ["-m", "experiments.run"]
    out = str(tmp_path)
    commands = _commands(
        "run", OUT=tmp_path, STUDIES=["all", "default"], SMOKE=True, CPU_STUDIES=[]
    )
    assert commands == [
        [sys.executable, *run, "--device=tpu", f"--study={study}", "--out", out, "--smoke"]
        for study in ("all", "default")
    ]  # fmt: skip
    (plain,) = _commands("run", OUT=tmp_path, STUDIES=["all"], CPU_STUDIES=[])
    assert plain == commands[0][:-1]  # SMOKE is off by default: no --smoke
    predict = _commands("predict", OUT=tmp_path, ENV={}, subprocess=_ChildSays("gpu-t4\n"))
    assert predict == [
        [sys.executable, *run, "--target=gpu-t4", f"--model={model}", "--batch-size=128",
         "--out", out]
        for model in ("mnist_cnn", "lenet5_keras")
    ]  # fmt: skip
    parser = run_cli.build_parser()
    for command in [*commands, plain, *predict]:
        parser.parse_args(command[3:])  # an unknown flag exits 2


class _ChildSays:
    """Stands for `subprocess` in a cell: every child prints `stdout` and exits 0."""

    def __init__(self, stdout: str) -> None:
        self.stdout, self.calls = stdout, []

    def run(self, command, **kwargs):
        self.calls.append(command)
        return subprocess.CompletedProcess(command, 0, self.stdout, "")


def test_the_prediction_is_compiled_for_the_chips_one_device_target_and_compared(tmp_path, capsys):
    # The child asks JAX for this runtime's chip and the library for its one-device
    # target (the device the devices study timed); the comparison runs on OUT's records.
    child = _ChildSays("tpu-v5e-1\n")
    namespace = {"os": os, "sys": sys, "re": re, "Path": Path, "subprocess": child}
    exec(cell_source("parameters"), namespace)
    calls = []
    namespace.update(OUT=tmp_path, ENV={}, run_live=lambda c, env=None: calls.append(c) or 0)
    exec(cell_source("predict"), namespace)
    (asked,) = child.calls
    assert asked[:2] == [sys.executable, "-c"] and "targets.matching(" in asked[2]
    assert namespace["HERE"] == "tpu-v5e-1" and len(calls) == 2
    exec(cell_source("compare"), namespace)
    assert calls[2][:2] == [sys.executable, "-c"] and calls[2][3] == str(tmp_path)
    assert "versus_measured_text" in calls[2][2]
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("device", "child", "said"), [
    ("cpu", "", "skipped, a CPU is no target"),
    ("gpu", "\n", "skipped, no target is this runtime's chip"),
])  # fmt: skip
def test_without_a_target_the_comparison_is_skipped_in_one_line(
    tmp_path, capsys, device, child, said
):
    asked = _ChildSays(child)
    namespace = {"os": os, "sys": sys, "re": re, "Path": Path, "subprocess": asked}
    exec(cell_source("parameters"), namespace)
    calls = []
    namespace.update(
        OUT=tmp_path, ENV={}, DEVICE=device, run_live=lambda c, env=None: calls.append(c) or 0
    )
    exec(cell_source("predict"), namespace)
    exec(cell_source("compare"), namespace)
    (line,) = capsys.readouterr().out.splitlines()
    assert said in line and calls == []  # nothing compiled, nothing compared
    assert len(asked.calls) == (device != "cpu")  # a CPU runtime's JAX is not asked


def test_the_defaults_run_the_headline_studies_and_all_is_one_parameter_away(tmp_path, monkeypatch):
    monkeypatch.delenv("JAX_PLATFORMS")  # a runtime's environment: JAX picks its backend
    envs = []
    commands = _commands("run", envs, OUT=tmp_path)
    # On the accelerator, then the devices study again on the runtime's own CPU: the
    # seeds' speedup from one machine's records.
    assert [c[3:5] for c in commands] == [
        ["--device=tpu", "--study=devices"],
        ["--device=tpu", "--study=matmul"],
        ["--device=cpu", "--study=devices"],
    ]
    assert envs[0] == envs[1] and "JAX_PLATFORMS" not in envs[0]
    assert envs[2] == {**envs[0], "JAX_PLATFORMS": "cpu"}
    assert all("--smoke" not in c for c in commands)  # full size: the answers, not a check
    on_cpu = _commands("run", OUT=tmp_path, DEVICE="cpu")  # a CPU runtime: once is enough
    assert [c[3:5] for c in on_cpu] == [["--device=cpu", "--study=devices"],
                                        ["--device=cpu", "--study=matmul"]]  # fmt: skip
    alone = _commands("run", OUT=tmp_path, CPU_STUDIES=[])
    assert [c[3] for c in alone] == ["--device=tpu", "--device=tpu"]
    for command in commands:
        run_cli.build_parser().parse_args(command[3:])
    assert 'STUDIES = ["all"]' not in cell_source("parameters")
    assert '["all"]: every study' in cell_source("parameters")  # the comment says how
    every, on_cpu_too = _commands("run", OUT=tmp_path, STUDIES=["all"])
    assert on_cpu_too[3:5] == ["--device=cpu", "--study=devices"]
    run_cli.build_parser().parse_args(every[3:])


def test_the_readme_opens_the_notebook_where_the_repository_is():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\[Open in Colab\]\(([^)]+)\)", readme)
    placeholder = make_notebook.REPOSITORY == make_notebook.PLACEHOLDER_URL
    # no link that opens nothing: while unpublished, the notebook is uploaded, with
    # the archive its SOURCE = "auto" finds
    assert links == ([] if placeholder else [make_notebook.colab_url()])
    assert ("File > Upload notebook" in readme) is placeholder
    assert make_notebook.ARCHIVE_COMMAND in readme


def test_a_runtime_jax_older_than_supported_is_one_line_naming_both():
    ns = _install_namespace()
    lower = re.search(r'"jax>=([0-9.]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    assert ns["JAX_LOWER_BOUND"] == lower
    with pytest.raises(RuntimeError) as refused:
        ns["check_runtime_jax"]("0.4.30")
    message = str(refused.value)
    assert message.startswith(
        f"this runtime's jax 0.4.30 is older than jaxcnn supports (jax>={lower}"
    )
    assert "\n" not in message
    for supported in (lower, jax.__version__, None):  # control: the range's own, and none yet
        ns["check_runtime_jax"](supported)
    install = cell_source("install")
    assert install.index('check_runtime_jax(before["jax"])') < install.index("run_live(command)")


def _newest_jax() -> str:
    """The jax release pip would install on this Python (asks the package index)."""
    return _pip_report([sys.executable, "-m", "pip", "install", "--no-deps", "jax"])["jax"]


def _oldest_jax_pins() -> list[str]:
    """The jax-family pins CI's oldest end installs with (.ci/constraints-oldest.txt)."""
    lines = (REPO / ".ci" / "constraints-oldest.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if re.match(r"jax(lib)?==", line)]


def _pip_report(command: list) -> dict[str, str]:
    """What `command` (a pip install) would install, resolved but not installed:
    {normalized name: version}."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        extra = ["--dry-run", "--ignore-installed", "--quiet", "--report", str(report)]
        subprocess.run(command + extra, check=True, stdout=subprocess.DEVNULL)
        installs = json.loads(report.read_text())["install"]
    return {
        re.sub(r"[-_.]+", "-", i["metadata"]["name"]).lower(): i["metadata"]["version"]
        for i in installs
    }


@pytest.mark.slow
@pytest.mark.parametrize("end", ["oldest", "newest"])
def test_install_cell_resolves_with_a_runtime_jax_at_either_end_of_the_range(tmp_path, end):
    """The install cell's own pins and pip command, as on a runtime whose jax is the
    oldest CI tests or the newest release for this Python: pip finds versions of every
    other dependency and keeps that jax (asks the package index, installs nothing)."""
    ns = _install_namespace()
    pins = _oldest_jax_pins() if end == "oldest" else [f"jax=={_newest_jax()}"]
    assert pins and pins[0].startswith("jax==")
    constraints = tmp_path / "jax-constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    resolved = _pip_report(ns["pip_install_command"](str(REPO), "", constraints))
    assert "jaxcnn" in resolved and "flax" in resolved
    for pin in pins:
        name, version = pin.split("==")
        assert resolved[name] == version


@pytest.mark.slow
def test_device_check_stops_with_instructions_when_the_tpu_is_absent():
    # JAX_PLATFORMS=cpu (conftest) is inherited by the check's child process
    namespace = {"DEVICE": "tpu", "sys": sys, "subprocess": subprocess}
    with pytest.raises(RuntimeError, match=r"(?s)tpu.*present: cpu.*Change runtime type"):
        exec(cell_source("device-check"), namespace)


# Offline (--no-index) where this environment's setuptools can build the editable
# install itself, as Colab's and Kaggle's can; where it cannot (setuptools < 70.1
# without `wheel`), pip fetches the build tools from its configured index.
OFFLINE = ["--no-index"] if _install_namespace()["runtime_can_build"]() else []


def runtime_env(root: Path) -> Path:
    """A venv whose python sees this environment's packages through a path entry (not
    its .pth files, so jaxcnn is not importable until the notebook installs it) and
    installs into its own site-packages. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "preinstalled.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def with_parameters(notebook: nbformat.NotebookNode, **parameters) -> nbformat.NotebookNode:
    """The notebook with a cell setting `parameters` right after the parameters cell."""
    source = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    (params,) = tagged(notebook, "parameters")
    notebook.cells.insert(notebook.cells.index(params) + 1, cell)
    return notebook


def outputs(cell: nbformat.NotebookNode, kind: str) -> list:
    return [o for o in cell.outputs if kind in o.get("data", {})]


@pytest.mark.slow
def test_notebook_runs_end_to_end_on_cpu_installing_the_local_checkout(tmp_path, monkeypatch):
    from nbclient import NotebookClient

    python = runtime_env(tmp_path / "runtime")
    spec = tmp_path / "jupyter" / "kernels" / "runtime"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "runtime",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES", raising=False)  # one CPU, like a runtime

    out = tmp_path / "out"
    notebook = with_parameters(
        nbformat.read(NOTEBOOK, as_version=4),
        SOURCE=str(REPO),
        DEVICE="cpu",
        STUDIES=[STUDY],
        SMOKE=True,
        OUT=str(out),
        INSTALL=True,
        PIP_ARGS=OFFLINE,
    )
    workdir = tmp_path / "work"  # not the checkout, so jaxcnn comes from the install
    workdir.mkdir()
    client = NotebookClient(
        notebook,
        kernel_name="runtime",
        timeout=300,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()

    site = next((tmp_path / "runtime" / "lib").glob("python*/site-packages"))
    names = sorted(p.name for p in site.iterdir())
    assert any(n.startswith("jaxcnn-") and n.endswith(".dist-info") for n in names), names
    assert not [n for n in names if n.startswith(("jax-", "jaxlib-"))], names  # jax kept
    (install,) = tagged(notebook, "install")
    install_text = "".join(o.get("text", "") for o in install.outputs)
    assert f"jax=={jax.__version__}" in install_text  # the pin it kept

    records = records_lib.load(out / "records.jsonl")
    assert sorted(r.workload.model for r in records) == STUDY_MODELS
    assert all(r.status == "ok" for r in records)
    assert {r.device.platform for r in records} == {"cpu"}
    assert (out / "REPORT.md").is_file()
    assert (out / "jaxcnn_results.zip").is_file()  # the last cell's archive
    (report,) = tagged(notebook, "report")
    assert outputs(report, "text/markdown")
    # every plot the report drew is shown (a plot needs three points along its axis, so a
    # run this small may draw none)
    assert len(outputs(report, "image/png")) == len(list((out / "report").glob("*.png")))
    # A CPU is no target: the comparison is skipped, said in one line.
    (predict,) = tagged(notebook, "predict")
    (said,) = "".join(o.get("text", "") for o in predict.outputs).splitlines()
    assert said.startswith("predicted against measured: skipped, a CPU is no target")
    (compare,) = tagged(notebook, "compare")
    assert compare.outputs == []


def test_source_auto_takes_the_newest_upload_never_its_own_results(tmp_path, capsys):
    ns = _install_namespace()
    content = tmp_path / "content"
    content.mkdir()
    ns["UPLOAD_FOLDERS"] = (content,)

    def uploaded(name, mtime):
        (content / name).write_bytes(b"")
        os.utime(content / name, (mtime, mtime))

    uploaded("jaxcnn_results.zip", 3000)  # the last cell's own archive, the newest
    uploaded("jaxcnn_results (1).zip", 3000)  # the same, downloaded twice
    with pytest.raises(ValueError, match="found no jaxcnn"):  # never taken for jaxcnn
        ns["find_source"](ns["UPLOAD_FOLDERS"])
    uploaded("jaxcnn-0.1.0-py3-none-any.whl", 1000)  # an old wheel, first by name
    uploaded("jaxcnn.zip", 2000)  # the archive uploaded since
    capsys.readouterr()
    assert ns["find_source"](ns["UPLOAD_FOLDERS"]) == str(content / "jaxcnn.zip")
    assert capsys.readouterr().out == (
        f"SOURCE='auto': {content / 'jaxcnn.zip'} (the newest of 2 there)\n"
    )
    uploaded("jaxcnn-0.1.0-py3-none-any.whl", 4000)  # the positive control: now the wheel
    assert ns["find_source"](ns["UPLOAD_FOLDERS"]) == str(content / "jaxcnn-0.1.0-py3-none-any.whl")
