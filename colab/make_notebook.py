"""Write colab/jaxcnn_study.ipynb from the cells below: python colab/make_notebook.py

The notebook is generated so that it is reviewed as code and never drifts:
tests/test_notebook.py checks that the committed .ipynb is exactly what this script
writes. Edit the cells here, run the script, commit both. Outputs stay cleared.

Each code cell carries a tag naming its role (`parameters`, `install`, ...); the
parameters tag is papermill's, so `papermill -p DEVICE gpu ...` works unchanged, and the
tests find cells by tag rather than by position.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOK = Path(__file__).with_name("jaxcnn_study.ipynb")
PLACEHOLDER_URL = "https://github.com/OWNER/jaxcnn"
# Where this repository is published: the one place to say it. The notebook installs
# from it by default and the README's Colab link opens the notebook there
# (tests/test_notebook.py checks the link is this one). Still the placeholder: the
# install cell then asks for SOURCE, and the link opens nothing until OWNER is set.
REPOSITORY = PLACEHOLDER_URL
BRANCH = "main"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# How a checkout becomes the archive the notebook's SOURCE = "auto" finds once uploaded.
ARCHIVE_COMMAND = "git archive --format=zip -o jaxcnn.zip HEAD"


def colab_url(repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """The link that opens the notebook of `repository` (a GitHub URL) in Colab."""
    path = repository.removeprefix("https://github.com/").removesuffix(".git")
    return f"https://colab.research.google.com/github/{path}/blob/{branch}/colab/{NOTEBOOK.name}"


def jax_lower_bound(pyproject: Path = PYPROJECT) -> str:
    """The oldest jax jaxcnn supports: pyproject.toml's `jax>=X` dependency."""
    found = re.search(r'^\s*"jax>=([0-9.]+)"', pyproject.read_text(), re.MULTILINE)
    if found is None:
        raise ValueError(f"{pyproject} has no jax>= dependency")
    return found.group(1)


INTRO = f"""\
# jaxcnn study on a free TPU (or GPU)

Runs the jaxcnn study (`python -m experiments.run`) on this runtime's accelerator,
writes one JSON-line record per workload to `OUT/records.jsonl`, renders the report
(tables and plots) below, and offers the records for download so they can be merged
with records from other machines (`python -m experiments.report a/ b/ --out merged/`).
The notebook only installs and calls the `jaxcnn` package; no model or train-step code
lives here.

**Pick the accelerator first**, then run all cells top to bottom:

- **Colab**: *Runtime > Change runtime type* > **v5e-1 TPU** (free tier), or **T4 GPU**.
- **Kaggle**: *Settings > Accelerator* > **TPU v5e-8**, or **GPU T4 x2** / P100;
  *Settings > Internet* must be on to install from a git URL.

Then set `DEVICE` below to `"tpu"` or `"gpu"` to match. If JAX does not see that
accelerator, the device check stops the notebook and says what it sees instead (a TPU
runtime silently training on the CPU is the failure it prevents).

**`SOURCE`** is where jaxcnn is installed from. Its default, `"auto"`, needs no
edit: it finds jaxcnn on this runtime, a source archive or wheel you uploaded (make
one in a checkout: `{ARCHIVE_COMMAND}`), or a checkout, in `/content` (Colab: drop the
file in the *Files* pane) or in an attached Kaggle dataset (`/kaggle/input`). Or set
it to a git URL (a branch, tag or commit in `REF`) or a path.

**Run time.** The defaults run the seeds' two headline questions at full size:
`devices` (how much faster the accelerator trains the
MNIST CNN than a CPU) and `matmul` (how close it gets to its peak FLOP/s). `devices`
then runs again on the runtime's own host CPU (`CPU_STUDIES`), so the speedup is
measured on one machine. That CPU half is the long part (its measured time, and on
what: `colab/README.md`); the accelerator half has not been timed on a free runtime
yet. `CPU_STUDIES = []` skips it.
`STUDIES = ["all"]` runs every study (hours on a free tier); `SMOKE = True` runs the
studies asked for at toy size, to check the setup. Each study's docstring (in
`experiments/studies/`) says what it runs and at what size. A run that is interrupted (a Colab
disconnect) resumes where it stopped when rerun with the same `OUT`: finished workloads
are skipped and training restarts from its last checkpoint. On Colab, `OUT` is on
Google Drive (`MOUNT_DRIVE = True`, the default, asks for permission once) and survives
the runtime; on Kaggle, `/kaggle/working` is kept as the notebook's output when you
save a version. The last cell packs the records, the report and its plots into one
archive to download, and says where the records go in a checkout.
"""

PARAMETERS = f"""\
# Parameters (papermill-style: this cell is tagged `parameters`).
SOURCE = "auto"  # auto: an uploaded jaxcnn archive/wheel/checkout; or a git URL or a path
REF = "{BRANCH}"  # branch, tag or commit of a git SOURCE (ignored for a local path)
DEVICE = "tpu"  # "tpu", "gpu" or "cpu": must match the runtime's accelerator
# The seeds' headline questions; ["all"]: every study (hours on a free tier)
STUDIES = ["devices", "matmul"]
SMOKE = False  # True: the studies at toy size, to check the setup
# These studies also run on this runtime's own host CPU (--device=cpu), so the records
# hold the accelerator and the CPU of one machine: the seeds' speedup, measured here.
CPU_STUDIES = ["devices"]  # []: the accelerator alone
OUT = None  # results folder; None: Drive on Colab if mounted, /kaggle/working on Kaggle
DATA_DIR = None  # folder with the MNIST/Fashion-MNIST IDX .gz files, if you have one
INSTALL = True  # False: use the jaxcnn already installed in this runtime
MOUNT_DRIVE = True  # Colab only: mount Google Drive (asks for permission) to keep OUT
PIP_ARGS = []  # extra pip options, e.g. ["--no-index"] on a machine without network
EXTRA_ARGS = []  # extra experiments.run flags, e.g. ["--num-devices", "1"]
"""

WHERE = """
# Where this runs, and where the results go. OUT must outlive the runtime: a Colab VM
# is wiped at disconnect, Drive is not; Kaggle keeps /kaggle/working as the output.
import os
import sys
from pathlib import Path

ON_COLAB = "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ
ON_KAGGLE = "KAGGLE_KERNEL_RUN_TYPE" in os.environ or Path("/kaggle/working").is_dir()
DRIVE = Path("/content/drive/MyDrive")

if ON_COLAB and MOUNT_DRIVE and not DRIVE.is_dir():
    from google.colab import drive

    try:
        drive.mount("/content/drive")
    except Exception as e:  # permission refused, or no browser to ask in
        print(f"Drive not mounted ({e}): results stay on this runtime")

if OUT is None:
    if ON_COLAB and DRIVE.is_dir():
        OUT = DRIVE / "jaxcnn_results"
    elif ON_KAGGLE:
        OUT = Path("/kaggle/working/jaxcnn_results")
    else:
        OUT = Path("jaxcnn_results")
OUT = Path(OUT).expanduser().resolve()
OUT.mkdir(parents=True, exist_ok=True)
print(f"Colab: {ON_COLAB}  Kaggle: {ON_KAGGLE}  results: {OUT}")
if ON_COLAB and not str(OUT).startswith("/content/drive"):
    print("note: OUT is not on Drive, so it is lost when the runtime disconnects")
"""

INSTALL_CELL = r'''
# Install jaxcnn from SOURCE, keeping the runtime's own jax and jaxlib.
# Colab and Kaggle preinstall a jaxlib (and libtpu or CUDA plugins) built for their
# TPU/GPU drivers. A plain `pip install` could replace it with another version from
# PyPI, which loads without the accelerator or not at all. A constraints file pins
# every installed jax-family package to the version already here, so pip picks versions
# of jaxcnn's other dependencies (flax, optax, ...) that work with it instead.
# Later cells run jaxcnn in child processes, so the kernel needs no restart after this.
import codecs
import importlib
import importlib.metadata as metadata
import os
import re
import subprocess
import tempfile

# jax, jaxlib, libtpu and the PJRT/CUDA plugins: what the runtime matched to its drivers
JAX_FAMILY = re.compile(r"^(jax|jaxlib|libtpu(-nightly)?|jax-cuda\d+-(plugin|pjrt))$")


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def jax_constraints():
    """Constraint lines pinning the installed jax-family packages, e.g. "jax==0.6.2"."""
    pins = {}
    for dist in metadata.distributions():
        name = _normalized(dist.metadata["Name"] or "")
        if JAX_FAMILY.match(name):
            pins[name] = dist.version
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


def _version(name):
    try:
        return tuple(int(part) for part in re.findall(r"\d+", metadata.version(name))[:2])
    except metadata.PackageNotFoundError:
        return None


def runtime_can_build():
    """Whether the runtime's own setuptools can build jaxcnn's editable install, so that
    pip needs no index for build tools: pyproject.toml asks for setuptools >= 68, and
    before 70.1 setuptools builds wheels only with the `wheel` package beside it."""
    setuptools = _version("setuptools")
    if setuptools is None or setuptools < (68, 0):
        return False
    return setuptools >= (70, 1) or _version("wheel") is not None


# Where SOURCE = "auto" looks, in order: Colab's upload folder, Kaggle's attached
# datasets, the notebook's own folder.
UPLOAD_FOLDERS = (Path("/content"), Path("/kaggle/input"), Path.cwd())
ARCHIVE_COMMAND = "@ARCHIVE_COMMAND@"
# What the last cell packs this notebook's results into ("jaxcnn_results.zip", or a
# browser's "jaxcnn_results (1).zip"): never a jaxcnn to install.
RESULTS_ARCHIVE_STEM = "jaxcnn_results"


def _is_checkout(folder):
    pyproject = folder / "pyproject.toml"
    return pyproject.is_file() and 'name = "jaxcnn"' in pyproject.read_text(errors="replace")


def _folders(top, depth=2):
    """`top` and the folders beneath it, `depth` levels down, nearest first."""
    level = [top]
    for _ in range(depth + 1):
        yield from level
        level = sorted(
            c for f in level for c in f.iterdir() if c.is_dir() and os.access(c, os.R_OK)
        )


def find_source(folders=None):
    """The jaxcnn put on this runtime: under each of `folders` (UPLOAD_FOLDERS), nearest
    first (a Kaggle dataset is /kaggle/input/NAME/...), a checkout or the newest wheel
    (jaxcnn-*.whl) or source archive (jaxcnn*.zip, jaxcnn*.tar.gz) in a folder, never
    this notebook's own results (jaxcnn_results*.zip); it says which it chose."""
    for top in UPLOAD_FOLDERS if folders is None else folders:
        if not top.is_dir():
            continue
        for folder in _folders(top):
            if _is_checkout(folder):
                print(f"SOURCE='auto': the checkout {folder}")
                return str(folder)
            found = [
                path
                for pattern in ("jaxcnn*.whl", "jaxcnn*.zip", "jaxcnn*.tar.gz")
                for path in folder.glob(pattern)
                if path.is_file() and not path.name.startswith(RESULTS_ARCHIVE_STEM)
            ]
            if found:
                # the newest upload, not the first name: an old wheel beside a new zip
                newest = max(found, key=lambda path: (path.stat().st_mtime, path.name))
                others = f" (the newest of {len(found)} there)" if len(found) > 1 else ""
                print(f"SOURCE='auto': {newest}{others}")
                return str(newest)
    raise ValueError(
        "SOURCE='auto' found no jaxcnn on this runtime: upload a source archive (in a "
        f"checkout: {ARCHIVE_COMMAND}) to /content (Colab: the Files pane) or attach it "
        "as a Kaggle dataset, or set SOURCE to a git URL or a path (first cell)"
    )


def pip_install_command(source, ref, constraints_file, pip_args=()):
    """The pip command that installs jaxcnn from a git URL, a local checkout, or a
    wheel or source archive; SOURCE = "auto": the one `find_source` finds."""
    command = [sys.executable, "-m", "pip", "install", "-c", str(constraints_file)]
    if source == "auto":
        source = find_source()
    local = Path(source).expanduser()
    if local.is_file() and local.name.endswith((".whl", ".zip", ".tar.gz")):
        command.append(str(local.resolve()))
    elif local.is_dir():
        # Editable, so edits to the checkout take effect. When the runtime's setuptools
        # can build it (Colab's and Kaggle's can), build with that rather than in an
        # isolated environment fetched from an index: then it works offline.
        if runtime_can_build():
            command.append("--no-build-isolation")
        command += ["-e", str(local.resolve())]
    elif "github.com/OWNER/" in source:  # the README's placeholder, copied
        raise ValueError(f"SOURCE is still the placeholder {source!r}: set it to the "
                         "repository's git URL or a local checkout (first cell)")
    elif re.match(r"^(git\+)?(https?|ssh|git)://", source) or source.startswith("git@"):
        url = source if source.startswith("git+") else f"git+{source}"
        command.append(f"jaxcnn @ {url}@{ref}" if ref else f"jaxcnn @ {url}")
    else:
        raise ValueError(f"SOURCE {source!r} is neither a folder or archive here nor a git URL")
    return command + list(pip_args)


def run_live(command, env=None):
    """Run `command`, copying its output to this cell as it comes; its exit code
    (the cells below use it too)."""
    print("$", " ".join(map(str, command)), flush=True)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode
    # chunks, not lines: progress bars redraw with "\r" and would otherwise show late
    for chunk in iter(lambda: proc.stdout.read1(4096), b""):
        print(decode(chunk), end="", flush=True)
    return proc.wait()


JAX_LOWER_BOUND = "@JAX_LOWER_BOUND@"  # pyproject.toml's jax>=; no upper bound


def check_runtime_jax(version):
    """A one-line error if the runtime's jax (None: none yet) is older than jaxcnn
    supports: pip could not install jaxcnn beside it without replacing it."""
    release = lambda v: tuple(int(part) for part in re.findall(r"\d+", v)[:3])  # noqa: E731
    if version is not None and release(version) < release(JAX_LOWER_BOUND):
        raise RuntimeError(
            f"this runtime's jax {version} is older than jaxcnn supports (jax>="
            f"{JAX_LOWER_BOUND}, no upper bound): pick a newer runtime version, or upgrade "
            "jax for this accelerator (pip install -U 'jax[tpu]' or 'jax[cuda12]') and "
            "restart the runtime"
        )


def installed(names=("jaxcnn", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint")):
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


if INSTALL:
    before = installed()
    check_runtime_jax(before["jax"])  # before pip, whose own refusal would not say why
    constraints = jax_constraints()
    constraints_file = Path(tempfile.mkdtemp()) / "jax-constraints.txt"
    constraints_file.write_text("\n".join(constraints) + "\n")
    command = pip_install_command(SOURCE, REF, constraints_file, PIP_ARGS)
    print("keeping:", ", ".join(constraints) or "(no jax installed yet)")
    if run_live(command) != 0:
        raise RuntimeError("pip could not install jaxcnn; see its output above")
    importlib.invalidate_caches()  # so metadata sees what pip just wrote
    after = installed()
    for name, version in after.items():
        change = "" if before[name] == version else f"  (was {before[name]})"
        print(f"{name:>17} {version}{change}")
    if before["jax"] and after["jax"] != before["jax"]:
        raise RuntimeError("jax was replaced; restart the runtime to get its own back")
else:
    print("INSTALL is False: using the installed jaxcnn", installed())
'''

DEVICE_CHECK = r"""
# Is the accelerator asked for really what JAX sees? jaxcnn.devices.resolve answers
# (the same call experiments.run makes) and names what is present when it is not.
# It runs in a child process on purpose: a TPU can be opened by one process at a time
# and JAX on a GPU reserves most of its memory, so this kernel never initialises JAX
# and leaves the device to the study's process.
CHECK = '''
import sys
import jax
from jaxcnn import devices
from jaxcnn.errors import UsageError

print("jax", jax.__version__, "| default backend:", jax.default_backend())
for d in jax.devices():
    print(f"  {d}  device_kind={d.device_kind!r}")
try:
    print("will run on:", devices.describe(devices.resolve(sys.argv[1])))
except UsageError as e:
    print(e, file=sys.stderr)
    sys.exit(3)
'''
check = subprocess.run([sys.executable, "-c", CHECK, DEVICE], capture_output=True, text=True)
print(check.stdout, end="")
if check.returncode == 3:
    raise RuntimeError(
        f"{check.stderr.strip()}\n\nDEVICE={DEVICE!r} is not what this runtime has. "
        "Colab: Runtime > Change runtime type > v5e-1 TPU (or T4 GPU), then Run all. "
        "Kaggle: Settings > Accelerator > TPU v5e-8 (or GPU T4 x2), then Run all. "
        "Or set DEVICE to what is present."
    )
if check.returncode != 0:
    raise RuntimeError(f"the device check failed:\n{check.stderr}")
"""

RUN = r"""
# Run each study in its own process, streaming its output here. The CLI's exit codes:
# 0: every workload recorded (ok, or oom/nan, which are findings, not failures);
# 1: some workload ended in `error` and its record says why; the others were recorded,
#    so the notebook goes on to the report;
# 2: a usage error (unknown study, absent device, missing data); nothing ran: stop.
# Rerunning with the same OUT skips what is recorded and resumes from checkpoints.
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the child's prints arrive as made
# Then CPU_STUDIES on the host CPU beside the accelerator, the same workloads; its
# process sees the CPU alone (JAX_PLATFORMS=cpu), so it neither opens the TPU nor
# reserves the GPU's memory.
runs = [(study, DEVICE) for study in STUDIES]
if DEVICE != "cpu":
    runs += [(s, "cpu") for s in CPU_STUDIES if s in STUDIES or "all" in STUDIES]
errored = []
for study, device in runs:
    command = [sys.executable, "-m", "experiments.run", f"--device={device}",
               f"--study={study}", "--out", OUT]  # checkpoints: OUT/checkpoints
    if SMOKE:
        command.append("--smoke")
    if DATA_DIR:
        command += ["--data-dir", DATA_DIR]
    command += list(EXTRA_ARGS)
    code = run_live(command, ENV if device == DEVICE else {**ENV, "JAX_PLATFORMS": "cpu"})
    if code == 1:
        errored.append(f"{study} on {device}")
    elif code != 0:
        raise RuntimeError(f"study {study!r} on {device} stopped (exit code {code}); see above")
if errored:
    print(f"\nsome workloads of {errored} ended in `error`: their records say why")
print("\nrecords:", OUT / "records.jsonl")
"""

PREDICT = r"""
# The devices study's steps (mnist_cnn and lenet5_keras, batch 128, one device) compiled,
# not run, for this runtime's chip as a target (jaxcnn/perf/chips.py TARGETS: the chip's
# one-device target, the device the study timed), so each step measured above has its
# prediction beside it, made as for a chip not at hand: the device step and the loop
# step (the last cell compares them). Exit code 2 (no compiler for the chip installed)
# is said and passed over: the measured records stand without it. A CPU is no target.
FIND_TARGET = '''
import jax
from jaxcnn import targets

found = targets.matching(jax.devices()[0].device_kind, 1)
print(found.name if found else "")
'''


def one_device_target():
    # Asked of JAX in a child process, as the device check is: this kernel never opens
    # the device.
    found = subprocess.run([sys.executable, "-c", FIND_TARGET], capture_output=True,
                           text=True, env=ENV)
    return found.stdout.strip() or None


HERE = None if DEVICE == "cpu" else one_device_target()
if DEVICE == "cpu":
    print("predicted against measured: skipped, a CPU is no target (jaxcnn/perf/chips.py)")
elif HERE is None:
    print("predicted against measured: skipped, no target is this runtime's chip")
for model in ("mnist_cnn", "lenet5_keras") if HERE else ():
    command = [sys.executable, "-m", "experiments.run", f"--target={HERE}", f"--model={model}",
               "--batch-size=128", "--out", OUT]
    code = run_live(command, ENV)
    if code != 0:
        print(f"no compile-only prediction for {model} here (exit code {code}); see above")
"""

REPORT = r"""
# The report, made from the records alone: the answers (REPORT.md), then the details page
# of each study run here with its plots, each shown where the page links it (the
# notebook cannot follow those relative links).
from IPython.display import Image, Markdown, display

if run_live([sys.executable, "-m", "experiments.report", OUT, "--out", OUT], ENV) != 0:
    raise RuntimeError("the report failed; see above")
IMAGE_LINK = re.compile(r"^!\[[^\]]*\]\(([^)]+\.png)\)$", re.MULTILINE)
pages_dir = OUT / "report"
names = STUDIES if "all" not in STUDIES else sorted(p.stem for p in pages_dir.glob("*.md"))
shown = set()
for page in [OUT / "REPORT.md", *(pages_dir / f"{name}.md" for name in names)]:
    if not page.is_file():
        continue
    for i, part in enumerate(IMAGE_LINK.split(page.read_text(encoding="utf-8"))):
        if i % 2:  # text, image, text, ..., text
            shown.add((page.parent / part).resolve())
            display(Image(filename=str((page.parent / part).resolve())))
        elif part.strip():
            display(Markdown(part))
for plot in sorted(pages_dir.glob("*.png")):  # the plots of pages not shown above
    if plot.resolve() not in shown:
        display(Image(filename=str(plot)))
"""

DOWNLOAD = r"""
# Everything this run made, in one archive to download: the records, REPORT.md, its
# pages and plots (the checkpoints stay behind). In a checkout of jaxcnn the records
# join the committed ones in a folder of their own under results/ (the report reads
# every *.jsonl beneath the folders it is given).
import zipfile

archive = OUT / "jaxcnn_results.zip"
kept = [p for p in sorted(OUT.rglob("*"))
        if p.is_file() and p != archive and "checkpoints" not in p.relative_to(OUT).parts
        and p.suffix in (".jsonl", ".md", ".png")]
with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as packed:
    for path in kept:
        packed.write(path, path.relative_to(OUT))
print(f"{archive}: {len(kept)} files (records.jsonl, REPORT.md, report/, plots)")
print("In a checkout of jaxcnn: unzip it into a folder of its own under results/, e.g.\n"
      "  mkdir -p results/colab && unzip jaxcnn_results.zip records.jsonl -d results/colab\n"
      "  python -m experiments.report results/ --readme README.md")
if ON_COLAB:
    try:
        from google.colab import files

        files.download(str(archive))
    except Exception as e:  # e.g. run headless, with no browser to download to
        print(f"download not offered ({e}); the file is {archive}")
elif ON_KAGGLE:
    print(f"{archive} is in the notebook's Output (Save Version keeps it)")
"""

COMPARE = r"""
# Predicted against measured, for the steps timed here: each one-device step measured
# above beside its prediction compiled for this chip (the step timed alone against the
# device step, jaxcnn's own loop against the loop step) and their factor. The report's
# table of figures (experiments/report/figures.py) makes it from OUT's records alone, so
# the same records copied into results/ give the same rows there and enter the fit's
# bands unedited. On a CPU the predict cell said in one line why there is none.
COMPARE = '''
import sys
from experiments import records
from experiments.report import figures

print(figures.versus_measured_text(figures.build(records.load(sys.argv[1]))))
'''
if HERE and run_live([sys.executable, "-c", COMPARE, str(OUT)], ENV) != 0:
    raise RuntimeError("the comparison failed; see above")
"""

CELLS = [
    ("intro", "markdown", INTRO),
    ("parameters", "code", PARAMETERS),
    ("where", "code", WHERE),
    (
        "install",
        "code",
        INSTALL_CELL.replace("@JAX_LOWER_BOUND@", jax_lower_bound()).replace(
            "@ARCHIVE_COMMAND@", ARCHIVE_COMMAND
        ),
    ),
    ("device-check", "code", DEVICE_CHECK),
    ("run", "code", RUN),
    ("predict", "code", PREDICT),
    ("report", "code", REPORT),
    ("download", "code", DOWNLOAD),
    ("compare", "code", COMPARE),
]


def build() -> nbformat.NotebookNode:
    """The notebook, with fixed cell ids so that regenerating it changes nothing."""
    cells = []
    for name, kind, source in CELLS:
        if kind == "markdown":
            cell = new_markdown_cell(source.strip("\n"))
        else:
            cell = new_code_cell(source.strip("\n"), metadata={"tags": [name]})
        cell.id = name
        cells.append(cell)
    notebook = new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "accelerator": "TPU",  # Colab's hint for the runtime type to ask for
        "colab": {"provenance": []},
    }
    nbformat.validate(notebook)
    return notebook


def render() -> str:
    return nbformat.writes(build())


def main() -> int:
    NOTEBOOK.write_text(render(), encoding="utf-8")
    print(f"wrote {NOTEBOOK}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
