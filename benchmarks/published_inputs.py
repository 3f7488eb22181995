"""python -m benchmarks.published_inputs [--pipelines NAME,...] [--epochs E] [--out DIR]:
each published JAX loop's input pipeline replayed on this CPU with no model behind it.

Why: a published loop's step is its input pipeline's wait as well as its device step.
The Colab notebook's Flax CNN on a TPU v2 (published_references.json) crops and
normalises 128 images a step in a torch DataLoader's two worker processes, and its loop
waits for them far longer than the chip computes. jaxcnn's loop gathers uint8 batches
from memory, so its own host parts cannot stand for that wait; a replay measures it.

Each pipeline is the published source's dataset class, transforms, collate function and
loader settings, as written (cited beside each), over synthetic data of the published
shapes and dtypes (the same bytes per image: no transform here reads pixel values to
decide its work). The loop's own thread pulls batches as fast as they come: one sample
per epoch (its batches' mean), after one untimed epoch (the workers' start, first-touch
memory). One record (workload kind input) per pipeline in DIR/records.jsonl.

Workers: a loader of more worker processes than this machine has cores is replayed with
one per core (`input.workers`), beside the published count (`input.workers_published`);
experiments.predict.published_loops scales the wait to the published count.

The torch pipelines need torch and torchvision (benchmarks/requirements-inputs.txt, in a
virtualenv of their own, as benchmarks/peers.py); the NumPy one (JAX's stax example)
runs anywhere. Never run in CI: the committed records in results/references-inputs/ are
what the prediction reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from benchmarks.command_line import UsageError, names, records_path
from experiments import records  # the standard library and pydantic: no jax
from experiments.cli.options import OneLineParser  # JAX-free
from experiments.records.host_cpu import describe as describe_cpu
from experiments.records.stats import summarize

PROG = "python -m benchmarks.published_inputs"
REQUIREMENTS = "benchmarks/requirements-inputs.txt"
# TensorFlow apart: its pins and the torch ones are kept out of each other's virtualenv.
REQUIREMENTS_TF = "benchmarks/requirements-inputs-tf.txt"
# the modules a replay's own virtualenv installs, and from which requirements file
INSTALLED_FROM = {"torch": REQUIREMENTS, "torchvision": REQUIREMENTS, "tensorflow": REQUIREMENTS_TF}
SEED = 0
MIN_EPOCHS = 3


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """One published loop's input pipeline, as its source builds it."""

    name: str
    source: str  # the published code it replays, at a commit
    dataset: str  # what the synthetic data stands for
    batch_size: int
    # what makes the batches beside the loop's own thread (0: that thread alone): a torch
    # loader's worker processes; 1 for a tf.data pipeline that prefetches, whose map and
    # batch run on tf.data's own threads, outside the GIL, while the loop dispatches
    workers: int
    needs: tuple[str, ...]  # the modules it imports beyond NumPy
    build: Callable[[int], Iterable[Any]]  # workers -> an iterable of one epoch's batches


# --- the published pieces, as written ---------------------------------------------------


def numpy_collate(batch: Sequence[Any]) -> Any:
    """The collate function the UvA tutorials and the Colab notebook pass their loaders."""
    if isinstance(batch[0], np.ndarray):
        return np.stack(batch)
    if isinstance(batch[0], tuple | list):
        return [numpy_collate(samples) for samples in zip(*batch, strict=True)]
    return np.array(batch)


# The CIFAR-10 channel statistics the Colab notebook writes out (float64, as NumPy makes
# them: so its normalised images are float64); the UvA tutorial computes the same from the
# data.
CIFAR_MEANS = np.array([0.49139968, 0.48215841, 0.44653091])
CIFAR_STD = np.array([0.24703223, 0.24348513, 0.26158784])


def normalised(img: Any) -> np.ndarray:
    """image_to_numpy of UvA Tutorial 5 and the Colab notebook."""
    img = np.array(img, dtype=np.float32)
    return (img / 255.0 - CIFAR_MEANS) / CIFAR_STD


def scaled(img: Any) -> np.ndarray:
    """image_to_numpy of UvA Tutorial 9 (float32 in [-1, 1])."""
    img = np.array(img, dtype=np.float32)
    if img.max() > 1:
        img = img / 255.0 * 2.0 - 1.0
    return img


def cifar_images(n: int = 50_000) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(SEED)
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, n).tolist()


def _cifar_loader(
    transform: Callable[[Any], Any], batch_size: int, **loader: Any
) -> Callable[[int], Any]:
    """torchvision's CIFAR10 (its __getitem__: Image.fromarray, then the transform) split
    45,000 / 5,000 as both sources do, under a DataLoader of the source's settings."""

    def build(workers: int) -> Any:
        import torch
        from PIL import Image
        from torch.utils import data

        class Cifar10(data.Dataset):
            def __init__(self) -> None:
                self.data, self.targets = cifar_images()

            def __len__(self) -> int:
                return len(self.data)

            def __getitem__(self, index: int) -> tuple[Any, int]:
                img = Image.fromarray(self.data[index])
                return transform(img), self.targets[index]

        generator = torch.Generator().manual_seed(42)
        train, _ = data.random_split(Cifar10(), [45_000, 5_000], generator=generator)
        return data.DataLoader(
            train,
            batch_size=batch_size,
            shuffle=True,
            drop_last=True,
            collate_fn=numpy_collate,
            num_workers=workers,
            persistent_workers=workers > 0,
            **loader,
        )

    return build


def _augmented(crop_ratio: tuple[float, float]) -> Callable[[Any], Any]:
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.RandomHorizontalFlip(),
            transforms.RandomResizedCrop((32, 32), scale=(0.8, 1.0), ratio=crop_ratio),
            normalised,
        ]
    )


def _augmented_cifar(batch_size: int) -> Callable[[int], Any]:
    def build(workers: int) -> Any:
        return _cifar_loader(_augmented((0.9, 1.1)), batch_size)(workers)

    return build


def _toy_points(workers: int) -> Any:
    """The Colab notebook's ToyDataset (10,000 2-D float64 points, int labels), split
    8,000 / 2,000 by random_split, under DataLoader(batch 128, no shuffle, numpy_collate)."""
    import torch
    from torch.utils import data

    class ToyDataset(data.Dataset):
        def __init__(self, size: int) -> None:
            rng = np.random.default_rng(SEED)
            self.size = size
            self.data = rng.normal(size=(size, 2))
            self.label = rng.integers(0, 2, size)

        def __len__(self) -> int:
            return self.size

        def __getitem__(self, idx: int) -> tuple[Any, Any]:
            return self.data[idx], self.label[idx]

    generator = torch.Generator().manual_seed(42)
    train, _ = data.random_split(ToyDataset(10_000), [8_000, 2_000], generator=generator)
    return data.DataLoader(
        train, batch_size=128, shuffle=False, collate_fn=numpy_collate, num_workers=workers
    )


class _StaxStream:
    """JAX's examples/mnist_classifier.py data_stream: a permutation a pass, each batch
    fancy-indexed from the float32 images (60,000 x 784) and one-hot labels."""

    def __init__(self, workers: int) -> None:
        rng = np.random.default_rng(SEED)
        self.images = rng.random((60_000, 784), dtype=np.float32)
        self.labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 60_000)]
        self.rng = np.random.RandomState(0)

    def __iter__(self) -> Any:
        perm = self.rng.permutation(60_000)
        for i in range(-(-60_000 // 128)):
            index = perm[i * 128 : (i + 1) * 128]
            yield self.images[index], self.labels[index]


def _lwcookbook_cifar(workers: int) -> Any:
    """The Lightweighting Cookbook's train provider (dataloader/CIFAR.py, Augmentation.py):
    per batch a NumPy index of the normalised float64 images, two PRNG splits, a put to
    JAX's CPU device and a jitted vmapped flip and reflect-pad-4 random crop there,
    `shard` (a jnp.reshape per array) and Flax's prefetch_to_device(size=10), all in the
    loop's own thread. jax.random.shuffle, gone from JAX, is its permutation."""
    from functools import partial

    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the host's side, replayed on its CPU
    import jax
    import jax.numpy as jnp
    from flax.jax_utils import prefetch_to_device

    rng = np.random.default_rng(SEED)
    means, stds = np.array([113.9, 123.0, 125.3]), np.array([66.7, 62.1, 63.0])
    images = (rng.integers(0, 256, (50_000, 32, 32, 3)).astype(np.uint8) - means) / stds
    data = {"image": images, "label": rng.integers(0, 10, 50_000)}
    devices, batch_size = jax.local_devices(), 128

    def flip(key: Any, img: Any) -> Any:
        return jax.lax.cond(jax.random.bernoulli(key), jnp.fliplr, lambda i: i, img)

    def crop_pad(key: Any, img: Any, pad: int = 4) -> Any:
        key, sub = jax.random.split(key)
        cond = jax.random.bernoulli(sub)
        key, sub = jax.random.split(key)
        h, w = jax.random.randint(sub, [2], 0, pad * 2)

        def aug(img: Any) -> Any:
            padded = jnp.pad(img, [[pad, pad], [pad, pad], [0, 0]], mode="reflect")
            return jax.lax.dynamic_slice(padded, (h, w, 0), img.shape)

        return jax.lax.cond(cond, aug, lambda i: i, img)

    @jax.jit
    @partial(jax.vmap, in_axes=(0, 0))
    def pre_processing(key: Any, img: Any) -> Any:
        key, sub = jax.random.split(key)
        img = flip(sub, img)
        key, sub = jax.random.split(key)
        return crop_pad(sub, img)

    def shard(x: Any) -> Any:
        b, *d = x.shape
        return jnp.reshape(x, [len(devices), b // len(devices), *d])

    class Provider:
        def __init__(self) -> None:
            self.key = jax.random.key(SEED)

        def batches(self) -> Any:
            self.key, sub = jax.random.split(self.key)
            indices = np.asarray(jax.random.permutation(sub, np.arange(50_000)))
            for batch in range(50_000 // batch_size):
                index = indices[batch * batch_size : (batch + 1) * batch_size]
                found = {k: d[index] for k, d in data.items()}
                self.key, sub = jax.random.split(self.key)
                keys = jax.random.split(sub, batch_size)
                found["image"] = jax.device_put(found["image"], jax.devices("cpu")[0])
                found["image"] = pre_processing(keys, found["image"])
                yield {k: shard(d) for k, d in found.items()}

        def __iter__(self) -> Any:
            for batch in prefetch_to_device(self.batches(), size=10):
                yield jax.block_until_ready(batch)  # ready, as the step that takes it waits

    return Provider()


def _jia_tfds_mnist(workers: int) -> Any:
    """The "JAX in Action" book's Chapter 11 MNIST input: tfds.load("mnist", as_supervised=True)'s
    train split, `.map(preprocess)` (tf.cast to float32, / 255.0: one element at a time on
    tf.data's threads), `.batch(32)`, `.prefetch(1)`, iterated through tfds.as_numpy.

    TFDS's side, rebuilt without TFDS or a download: the split is one TFRecord file of
    tf.train.Example protos (a PNG-encoded 28x28x1 uint8 image, an int64 label), parsed and
    decoded on a parallel map as TFDS decodes it, then `.cache()`d (TFDS caches a split under
    250 MiB read unshuffled: MNIST's 21 MiB) and mapped to (image, label) by as_supervised.
    The untimed first epoch fills the cache, so the timed epochs read decoded images from
    memory as the notebook's epochs after its first did. tfds.as_numpy on an eager dataset
    is a loop over it turning each tensor to NumPy (`_numpy()`), as here."""
    import tempfile

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")  # no GPU here; tf.data runs on the CPU anyway
    rng = np.random.default_rng(SEED)
    images = rng.integers(0, 256, (60_000, 28, 28, 1), dtype=np.uint8)
    labels = rng.integers(0, 10, 60_000)
    path = os.path.join(
        tempfile.mkdtemp(prefix="jia-mnist-"), "mnist-train.tfrecord-00000-of-00001"
    )
    with tf.io.TFRecordWriter(path) as writer:
        for image, label in zip(images, labels, strict=True):
            png = tf.io.encode_png(image).numpy()
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(serialized: Any) -> Any:
        example = tf.io.parse_single_example(serialized, spec)
        image = tf.image.decode_png(example["image"], channels=1)
        return {"image": tf.reshape(image, (28, 28, 1)), "label": example["label"]}

    split = tf.data.TFRecordDataset([path]).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    data_train = split.cache().map(lambda ex: (ex["image"], ex["label"]))

    def preprocess(img: Any, label: Any) -> Any:  # the notebook's, as written
        return (tf.cast(img, tf.float32) / 255.0), label

    train_data = data_train.map(preprocess).batch(32).prefetch(1)

    class AsNumpy:  # tfds.as_numpy's eager iterator, re-entered each epoch as the notebook does
        def __iter__(self) -> Any:
            for elem in train_data:
                yield tuple(t._numpy() for t in elem)

    return AsNumpy()


TORCH = ("torch", "torchvision")
JAX = ("jax", "flax")
TENSORFLOW = ("tensorflow",)
JIA = "https://github.com/che-shr-cat/JAX-in-Action/blob/904d69f2ed26ab31800c7e70f60275e6b513a069/Chapter-11/"
UVA = "https://github.com/phlippe/uvadlc_notebooks_benchmarking/blob/1df2da7b27ff54cd00a306d648a74b308942b664/JAX/"
COLAB = "https://github.com/mashaan14/YouTube-channel/blob/5650ca2d908907fc2fc78b24d6242bd32373cc3b/jax_performance/2024_04_14_jax_speed_test.md"
PIPELINES = {
    p.name: p
    for p in (
        Pipeline(
            "lwcookbook-cifar",
            "https://github.com/sseung0703/Lightweighting_Cookbook/blob/"
            "fa950c198ec0883b813ccf83a1f1b168f4a2f648/dataloader/CIFAR.py (gen_provider)",
            "synthetic-cifar10",
            128,
            0,
            JAX,
            _lwcookbook_cifar,
        ),
        Pipeline(
            "stax-mnist",
            "https://github.com/jax-ml/jax/blob/main/examples/mnist_classifier.py (data_stream)",
            "synthetic-mnist",
            128,
            0,
            (),
            _StaxStream,
        ),
        Pipeline(
            "colab-cifar-augmented",
            COLAB + " (CIFAR10, train_transform, train_data_loader)",
            "synthetic-cifar10",
            128,
            2,
            TORCH,
            _augmented_cifar(128),
        ),
        Pipeline(
            "colab-toy-points",
            COLAB + " (ToyDataset, train_data_loader)",
            "synthetic-points",
            128,
            0,
            TORCH,
            _toy_points,
        ),
        Pipeline(
            "jia-tfds-mnist",
            JIA
            + "Chapter_11.1_MNIST_MLP_Flax_TrainState_with_metrics.ipynb (preprocess, train_data)",
            "synthetic-mnist",
            32,
            1,  # .prefetch(1)
            TENSORFLOW,
            _jia_tfds_mnist,
        ),
        Pipeline(
            "uva-tutorial5-cifar",
            UVA + "Tutorial5_Inception_ResNet_DenseNet.py (train_transform, train_loader)",
            "synthetic-cifar10",
            128,
            8,
            TORCH,
            _augmented_cifar(128),
        ),
        Pipeline(
            "uva-tutorial9-cifar",
            UVA + "Tutorial9_AE_CIFAR10.py (image_to_numpy, train_loader)",
            "synthetic-cifar10",
            256,
            8,
            TORCH,
            lambda workers: _cifar_loader(scaled, 256, pin_memory=True)(workers),
        ),
    )
}


# --- timing ----------------------------------------------------------------------------


def nbytes(batch: Any) -> int:
    """The bytes of a batch's arrays (a tuple or list of them, or a dict's values)."""
    arrays = batch.values() if isinstance(batch, dict) else batch
    return sum(int(np.asarray(a).nbytes) for a in arrays)


def replay(pipeline: Pipeline, workers: int, epochs: int) -> dict[str, Any]:
    """`epochs` timed epochs after an untimed one: the record's `input`."""
    loader = pipeline.build(workers)
    size = 0
    for batch in loader:  # untimed: workers start, memory is touched
        size = max(size, nbytes(batch))
    samples, count = [], 0
    for _ in range(epochs):
        count = 0
        start = time.perf_counter()
        for _batch in loader:
            count += 1
        samples.append((time.perf_counter() - start) / count)
    return {
        "workers": workers,
        "workers_published": pipeline.workers,
        "batch_bytes": size,
        "batches": count,
        "batch_s": summarize(samples),
    }


def _version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def record_of(pipeline: Pipeline, epochs: int) -> dict[str, Any]:
    """One pipeline's record, ok or not: a failure is data, the run goes on."""
    workers = min(pipeline.workers, os.cpu_count() or 1)
    env = records.environment(
        packages=("numpy", "torch", "torchvision", "pillow", "jax", "jaxlib", "flax"),
        cpu=describe_cpu(),
        cpu_count=os.cpu_count(),
        framework=(pipeline.needs or ("numpy",))[0],
    )
    if "tensorflow" in pipeline.needs:  # pip's tensorflow-cpu is TensorFlow too
        env["tensorflow"] = _version("tensorflow") or _version("tensorflow-cpu")
    workload = {
        "kind": "input",
        "study": "references",
        "pipeline": pipeline.name,
        "model": "none",
        "dataset": pipeline.dataset,
        "batch_size": pipeline.batch_size,
        "strategy": "single",
        "timing_steps": epochs,
    }
    device = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1}
    record = records.new_record(workload, {**device, "host": socket.gethostname()}, env)
    try:
        record["input"] = replay(pipeline, workers, epochs)
    except Exception as e:  # one pipeline's failure becomes its record
        return records.failed(record, e)
    record["status"] = "ok"
    return record


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help="comma-separated")
    parser.add_argument("--epochs", type=int, default=5, help=f"timed epochs (>= {MIN_EPOCHS})")
    parser.add_argument("--out", default=records.DEFAULT_OUT, help="folder for records.jsonl")
    args = parser.parse_args(argv)
    args.pipelines = names(args.pipelines, list(PIPELINES), "pipeline")
    if args.epochs < MIN_EPOCHS:
        raise UsageError(f"--epochs {args.epochs}: must be >= {MIN_EPOCHS} (p10/p90 need them)")
    for name in args.pipelines:
        missing = [m for m in PIPELINES[name].needs if importlib.util.find_spec(m) is None]
        if missing:  # a virtualenv's requirements file, else jaxcnn's own install
            files = [INSTALLED_FROM[m] for m in missing if m in INSTALLED_FROM]
            how = f"pip install -r {files[0]}" if files else "pip install -e ."
            raise UsageError(
                f"{name} needs {' and '.join(missing)}: {how} (or --pipelines stax-mnist)"
            )
    args.records = records_path(args.out)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name in args.pipelines:
        record = record_of(PIPELINES[name], args.epochs)
        try:
            records.append_or_keep(args.records, record)
        except (records.RecordError, records.NotRecorded) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if record["status"] != "ok":
            print(f"{name}: {record['status']}: {record['message']}", flush=True)
            continue
        timed = record["input"]
        print(
            f"{name}: {timed['batch_s']['median'] * 1e3:.3f} ms a batch "
            f"({timed['workers']} workers, published {timed['workers_published']}) "
            f"-> {args.records}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
