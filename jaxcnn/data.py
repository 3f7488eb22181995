"""Datasets as numpy arrays: uint8 NHWC images and int32 labels.

Images stay uint8 until the train step scales them to [0, 1] on the device: a quarter
of the bytes to move, and the whole of MNIST fits on any accelerator.

    images, labels = jaxcnn.data.load("mnist", "train", data_dir="path/to/mnist")
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from jaxcnn.errors import DataError, UsageError, absl_logs_held, check_count

DATASETS = ("digits", "mnist", "fashion_mnist", "synthetic")
SPLITS = ("train", "test")
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_IMAGE_MAGIC, _LABEL_MAGIC = 2051, 2049
IDX_CLASSES = 10  # MNIST and Fashion-MNIST: labels 0..9
_DIGITS_TEST_FRACTION = 0.2
_DIGITS_COUNT = 1797  # scikit-learn's load_digits
FILE_DATASETS = ("mnist", "fashion_mnist")  # read from --data-dir's IDX files, or TFDS
_TFDS_TRAIN, _TFDS_TEST = 60_000, 10_000  # both: 60,000 train and 10,000 test images
SYNTHETIC_TRAIN, SYNTHETIC_TEST = 2048, 512


def load(
    name: str,
    split: str,
    data_dir: str | os.PathLike | None = None,
    *,
    shape: tuple[int, int, int] = (28, 28, 1),
    num_classes: int = 10,
    num_examples: int | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N, H, W, C], labels int32 [N]) for one split of a dataset.

    `shape`, `num_classes`, `num_examples` and `seed` shape `synthetic` data only.
    """
    if name not in DATASETS:
        raise UsageError(f"unknown dataset {name!r}: choose one of {', '.join(DATASETS)}")
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}: choose one of {', '.join(SPLITS)}")
    if name == "digits":
        return _digits(split)
    if name == "synthetic":
        count = num_examples or (SYNTHETIC_TRAIN if split == "train" else SYNTHETIC_TEST)
        return synthetic(count, shape, num_classes, seed=seed + (split == "test"))
    if data_dir is not None:
        return read_idx_split(data_dir, split)
    return _tfds(name, split)


def train_size(name: str, data_dir: str | os.PathLike | None = None) -> int | None:
    """The number of training images `load(name, "train", data_dir)` returns, without
    reading them: fixed for digits, synthetic (by default) and TFDS's MNIST and
    Fashion-MNIST; the IDX files' headers, where both headers agree and each file's
    length bears its header out. None where it cannot be told cheaply (the loader then
    reads the files and says what is wrong)."""
    if name == "digits":
        return _DIGITS_COUNT - round(_DIGITS_COUNT * _DIGITS_TEST_FRACTION)
    if name == "synthetic":
        return SYNTHETIC_TRAIN
    if name not in FILE_DATASETS:
        return None
    if data_dir is None:
        return _TFDS_TRAIN
    image_stem, label_stem = _IDX_FILES["train"]
    try:  # a header alone is a claim: the count is trusted only where both files bear it out
        images = _idx_count_checked(_find_idx(Path(data_dir), image_stem))
        labels = _idx_count_checked(_find_idx(Path(data_dir), label_stem))
    except (DataError, OSError, EOFError, zlib.error):
        return None
    return labels if labels is not None and labels == images else None


def _idx_count_checked(path: Path) -> int | None:
    """The count an IDX file's header gives, if the file's length agrees with its whole
    header (its data size read from the gzip trailer, not by decompressing); else None."""
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as handle:
        head = handle.read(16)
    header, dims = _idx_header(path, head)
    expected = header + math.prod(dims)
    return dims[0] if expected <= MAX_IDX_BYTES and _data_length(path) == expected else None


def _data_length(path: Path) -> int:
    """The uncompressed length of `path`: a gzip file's ISIZE trailer (its length mod 2**32,
    exact for any IDX file JAX could hold), a plain file's size."""
    if path.suffix != ".gz":
        return path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(-4, os.SEEK_END)
        return int.from_bytes(handle.read(4), "little")


def test_size(name: str) -> int | None:
    """The number of test images `load(name, "test")` returns for a dataset's standard
    split (MNIST's and Fashion-MNIST's 10,000, digits' fixed 359, synthetic's default):
    what an accuracy measured on it is a share of. None for an unknown name."""
    if name == "digits":
        return round(_DIGITS_COUNT * _DIGITS_TEST_FRACTION)
    if name == "synthetic":
        return SYNTHETIC_TEST
    return _TFDS_TEST if name in FILE_DATASETS else None


def synthetic(
    count: int, shape: tuple[int, int, int], num_classes: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Random images and labels: for throughput only; their accuracy means nothing."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
    labels = rng.integers(0, max(num_classes, 2), size=count, dtype=np.int32)
    return images, labels


def _digits(split: str) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 8x8 digits on a 28x28 canvas, like MNIST.

    Each pixel (0..16) is scaled to 0..255 and repeated 3x3 (24x24), then padded by
    2 on every side, MNIST's 20x20-in-28x28 margin in spirit. Fixed split: a
    permutation with seed 0, the last 20% (359 images) for test, 1,438 for train.
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)
    images = images.repeat(3, axis=1).repeat(3, axis=2)
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))[..., None]
    labels = bunch.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(labels))
    n_test = round(len(labels) * _DIGITS_TEST_FRACTION)
    chosen = order[:-n_test] if split == "train" else order[-n_test:]
    return images[chosen], labels[chosen]


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """One IDX file (gzip or raw): uint8 images [N, rows, cols] or labels [N].

    Checks the magic number and that the payload is exactly as long as the header says,
    before reading it: an uncompressed file by its size, a gzip file by reading no more
    than the header claims, so a header claiming a billion images is one line, not
    gigabytes of memory first.
    """
    path = Path(path)
    try:
        with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as handle:
            raw = handle.read(16)
            header, dims = _idx_header(path, raw)
            expected = math.prod(dims)  # Python's integers: numpy's product wraps at 2**63
            _check_claim(path, header, dims, expected)
            if path.suffix == ".gz":
                raw += _read_at_most(handle, header + expected - len(raw))
                found = len(raw) - header
            else:
                found = os.fstat(handle.fileno()).st_size - header
                if found == expected:
                    raw += handle.read()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: not a readable gzip file ({e}); download it again") from None
    if found != expected:
        raise DataError(
            f"{path}: header says {'x'.join(map(str, dims))} = {expected} bytes of data, "
            f"file has {found}"
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(dims)


# The most data an IDX file may claim: 4 GiB, a gzip trailer's range (so its length
# field is exact below it); MNIST's largest file holds 47 MB.
MAX_IDX_BYTES = 2**32 - 1


def _check_claim(path: Path, header: int, dims: list[int], expected: int) -> None:
    """DataError, before any of the body is read, if the header claims more than
    MAX_IDX_BYTES or a length the file does not have (a gzip file's by its trailer):
    a header claiming a billion images is one line, in constant memory."""
    shape = "x".join(map(str, dims))
    if header + expected > MAX_IDX_BYTES:
        raise DataError(
            f"{path}: header says {shape} = {expected:,} bytes of data, above the "
            f"{MAX_IDX_BYTES:,} an IDX file may hold; the file is not an MNIST-format set"
        )
    length = _data_length(path)
    if length != header + expected:
        where = "its gzip trailer says" if path.suffix == ".gz" else "file has"
        raise DataError(
            f"{path}: header says {shape} = {expected} bytes of data, {where} "
            f"{length - header}; download it again"
        )


def _idx_header(path: Path, head: bytes) -> tuple[int, list[int]]:
    """(the header's length, the dimensions it gives) of an IDX file starting `head`."""
    if len(head) < 8:
        raise DataError(f"{path}: {len(head)} bytes is too short for an IDX header")
    magic = int.from_bytes(head[:4], "big")
    if magic == _IMAGE_MAGIC:
        if len(head) < 16:
            raise DataError(f"{path}: truncated IDX image header")
        return 16, [int.from_bytes(head[i : i + 4], "big") for i in (4, 8, 12)]
    if magic == _LABEL_MAGIC:
        return 8, [int.from_bytes(head[4:8], "big")]
    raise DataError(
        f"{path}: bad IDX magic {magic:#010x} (expected {_IMAGE_MAGIC:#010x} for images "
        f"or {_LABEL_MAGIC:#010x} for labels)"
    )


def _read_at_most(handle: Any, limit: int) -> bytes:
    """Up to `limit` + 1 bytes of `handle` (one more than a header claims shows the file
    is longer than it says), in chunks: never more memory than the file really holds."""
    chunks, total = [], 0
    while total <= limit:
        chunk = handle.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _find_idx(data_dir: Path, stem: str) -> Path:
    for candidate in (data_dir / f"{stem}.gz", data_dir / stem):
        if candidate.exists():
            return candidate
    raise DataError(
        f"{data_dir}: no {stem}.gz; --data-dir must hold the four original MNIST-format "
        "IDX files (train-/t10k- images and labels)"
    )


def read_idx_split(data_dir: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The `split` of an MNIST-format directory of IDX files, checked for consistency."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"--data-dir {data_dir} does not exist or is not a directory")
    image_stem, label_stem = _IDX_FILES[split]
    images = read_idx(_find_idx(data_dir, image_stem))
    label_path = _find_idx(data_dir, label_stem)
    labels = read_idx(label_path)
    if images.ndim != 3 or labels.ndim != 1:
        raise DataError(f"{data_dir}: {image_stem} is not an image file or {label_stem} not labels")
    if len(images) != len(labels):
        raise DataError(
            f"{data_dir}: {len(images)} images but {len(labels)} labels in the {split} split"
        )
    if len(labels) == 0:  # a test accuracy over no image is nan, not a measurement
        raise DataError(
            f"{data_dir}: the {split} split has no images ({image_stem} holds none); "
            "download the files again"
        )
    if len(labels) and labels.max() >= IDX_CLASSES:
        bad = int(np.argmax(labels >= IDX_CLASSES))
        raise DataError(
            f"{label_path}: label {labels[bad]} at index {bad} is outside 0..{IDX_CLASSES - 1}, "
            f"the {IDX_CLASSES} classes of MNIST-format data; the file is damaged"
        )
    return images[..., None], labels.astype(np.int32)


# Where TFDS fetches MNIST and its prepared datasets from; probed before a download so
# that a machine without the network gets an error in seconds, not minutes of retries.
TFDS_DOWNLOAD_PROBE = "https://storage.googleapis.com/"
_PROBE_TIMEOUT_S = 5.0


def _reachable(url: str, timeout: float = _PROBE_TIMEOUT_S) -> str | None:
    """None if `url` answers (any HTTP status will do: the network is there), else why
    not, in a few words. Goes through the user's proxy settings, as TFDS would."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
    except urllib.error.HTTPError:
        return None
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        return f"{url} is unreachable: {reason}"
    return None


def _tfds_error(name: str, reason: str) -> DataError:
    return DataError(
        f"{name} is not available through TFDS here ({reason[:160]}); pass --data-dir DIR "
        "holding the original IDX .gz files (train-images-idx3-ubyte.gz and the other "
        "three) or use --dataset digits, which needs no download"
    )


def _tfds(name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Through `tfds.data_source` (ArrayRecord; reading needs no TensorFlow). A dataset
    TFDS has not prepared yet is downloaded, which needs the network: checked first."""
    try:
        import tensorflow_datasets as tfds

        try:
            # Not prepared: TFDS warns of the missing files, and what follows says it.
            with absl_logs_held():
                source = tfds.data_source(name, split=split, download=False)
        except (KeyError, AssertionError, FileNotFoundError):  # not prepared here yet
            offline = _reachable(TFDS_DOWNLOAD_PROBE)
            if offline:
                raise _tfds_error(name, f"not prepared, and {offline}") from None
            source = tfds.data_source(name, split=split)
        examples = [source[i] for i in range(len(source))]
    except DataError:
        raise
    except Exception as e:  # TFDS raises many types when offline or unprepared
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _tfds_error(name, reason) from None
    images = np.stack([np.asarray(ex["image"], np.uint8) for ex in examples])
    labels = np.asarray([ex["label"] for ex in examples], np.int32)
    return images.reshape(len(images), *images.shape[1:3], -1), labels


def check_arrays(name: str, images: Any, labels: Any) -> None:
    """Raise UsageError, in one line naming the fix, unless `images` and `labels` are
    arrays (numpy or jax: a list has no dtype, and indexing it by a batch's rows fails)
    with a batch axis, as many labels as images."""
    for what, value, fix in (
        ("images", images, "np.asarray(images)"),
        ("labels", labels, "np.asarray(labels, np.int32)"),
    ):
        if not (hasattr(value, "shape") and hasattr(value, "dtype")):
            raise UsageError(
                f"{name} {what} are a {type(value).__name__}, not an array: give {fix}"
            )
        if not value.shape:
            raise UsageError(f"{name} {what} are a scalar: give one row per example")
    if len(images) != len(labels):
        raise UsageError(
            f"{name} has {len(images)} images but {len(labels)} labels: give one label per image"
        )


def _unscaled_pixels(images: Any) -> bool:
    """Whether float `images` hold whole numbers in 0..255 reaching above 1: pixels not
    scaled to [0, 1]. Data scaled any other way (standardized, [-1, 1]) is never all
    whole numbers, so it passes."""
    if getattr(images, "is_fully_addressable", True) is False:
        images = images.addressable_data(0)
    low, high = float(images.min()), float(images.max())  # numpy's and jax's methods alike
    return 1 < high <= 255 and low >= 0 and bool((images == images.round()).all())


def check_split(name: str, images: Any, labels: Any, num_classes: int) -> None:
    """Raise UsageError, in one line naming the fix, unless `images` and `labels` are a
    split a model of `num_classes` classes can train or be tested on: arrays, as many
    labels as images, at least one, integer labels in 0..num_classes-1 (a binary model,
    with one output: 0..1), float images not holding unscaled pixels (whole numbers in
    0..255: the steps scale integer images to [0, 1] and take float ones as scaled, so
    these would train on values 255 times too large). Arrays may be numpy or jax (a
    replicated dataset: its local copy)."""
    check_arrays(name, images, labels)
    if len(labels) == 0:
        raise UsageError(f"{name} has no images: give at least one")
    if not np.issubdtype(labels.dtype, np.integer):
        raise UsageError(
            f"{name} labels are {labels.dtype}, not class indices: give integer labels "
            "(labels.astype(np.int32) where they are whole numbers)"
        )
    if getattr(labels, "is_fully_addressable", True) is False:
        labels = labels.addressable_data(0)  # replicated on every device: the local copy
    labels = np.asarray(labels)
    classes = max(num_classes, 2)  # one output: a binary model, labels 0 and 1
    outside = np.flatnonzero((labels < 0) | (labels >= classes))
    if len(outside):
        at = int(outside[0])
        raise UsageError(
            f"{name} label {int(labels[at])} at index {at} is outside 0..{classes - 1}, "
            f"the model's {classes} classes: fix the labels, or make the model with as many "
            "classes as they have"
        )
    if np.issubdtype(images.dtype, np.floating) and _unscaled_pixels(images):
        raise UsageError(
            f"{name} images are {images.dtype} pixels in 0..255, not scaled to [0, 1]: give "
            "them as uint8 (images.astype(np.uint8)), which jaxcnn scales itself, or scale "
            "them (images / 255)"
        )


def fit_to_shape(images: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Zero-pad images centrally to a model's (H, W, C): 28x28 MNIST into LeNet's 32x32."""
    _, h, w, c = images.shape
    th, tw, tc = shape
    if (h, w, c) == (th, tw, tc):
        return images
    if h > th or w > tw or c != tc:
        raise UsageError(
            f"images of shape {h}x{w}x{c} do not fit a model that takes {th}x{tw}x{tc}: "
            "choose a model for this dataset, or use --dataset synthetic"
        )
    top, left = (th - h) // 2, (tw - w) // 2
    return np.pad(images, ((0, 0), (top, th - h - top), (left, tw - w - left), (0, 0)))


def host_epoch_order(num_examples: int, seed: int, epoch: int) -> np.ndarray:
    """The example order of one epoch of the host loop: a fresh permutation per (seed,
    epoch), drawn by numpy; the compiled epoch draws its own (`epochs.device_epoch_order`)."""
    return np.random.default_rng([seed, epoch]).permutation(num_examples)


def batches(
    images: np.ndarray,
    labels: np.ndarray,
    batch_size: int,
    *,
    seed: int | None = None,
    epoch: int = 0,
    drop_remainder: bool = True,
) -> Iterator[dict[str, np.ndarray]]:
    """Batches {"image", "label", "mask"}; shuffled per epoch when `seed` is given.

    With drop_remainder=False the last batch is padded to full size and its padding
    has mask 0, so every batch has one shape and the step compiles once.
    """
    check_arrays("data.batches", images, labels)
    check_count("batch_size", batch_size, 1)
    n = len(labels)
    order = host_epoch_order(n, seed, epoch) if seed is not None else np.arange(n)
    stop = n - n % batch_size if drop_remainder else n
    for start in range(0, stop, batch_size):
        index = order[start : start + batch_size]
        mask = np.ones(batch_size, np.float32)
        if len(index) < batch_size:
            mask[len(index) :] = 0.0
            index = np.concatenate([index, np.repeat(index[:1], batch_size - len(index))])
        yield {"image": images[index], "label": labels[index], "mask": mask}


def steps_per_epoch(num_examples: int, batch_size: int) -> int:
    return num_examples // batch_size
