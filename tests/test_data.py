import gzip
import logging

import numpy as np
import pytest
import tensorflow_datasets as tfds
from conftest import write_idx

from jaxcnn import data
from jaxcnn.errors import DataError, UsageError, absl_logs_held


def test_idx_split_reads_what_was_written(idx_dir):
    images, labels = data.load("mnist", "train", idx_dir)
    assert images.shape == (64, 28, 28, 1) and images.dtype == np.uint8
    assert labels.shape == (64,) and labels.dtype == np.int32
    raw = gzip.open(idx_dir / "train-images-idx3-ubyte.gz").read()
    np.testing.assert_array_equal(
        images[..., 0], np.frombuffer(raw, np.uint8, offset=16).reshape(64, 28, 28)
    )
    assert data.load("fashion_mnist", "test", idx_dir)[0].shape == (32, 28, 28, 1)


def test_idx_reads_uncompressed_files(tmp_path):
    path = write_idx(tmp_path / "labels-idx1-ubyte", np.arange(10))
    np.testing.assert_array_equal(data.read_idx(path), np.arange(10))


def test_bad_gzip_is_a_data_error(tmp_path):
    path = tmp_path / "x.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="not a readable gzip"):
        data.read_idx(path)


def test_truncated_gzip_is_a_data_error(tmp_path):
    good = write_idx(tmp_path / "good.gz", np.zeros((10, 28, 28)))
    cut = tmp_path / "cut.gz"
    cut.write_bytes(good.read_bytes()[:40])
    with pytest.raises(DataError, match="cut.gz"):
        data.read_idx(cut)


def test_bad_magic_is_a_data_error(tmp_path):
    path = write_idx(tmp_path / "x.gz", np.zeros((3, 28, 28)), magic=1234)
    with pytest.raises(DataError, match="bad IDX magic 0x000004d2"):
        data.read_idx(path)


def test_wrong_count_is_a_data_error(tmp_path):
    path = write_idx(tmp_path / "x.gz", np.zeros((3, 28, 28)), count=5)
    with pytest.raises(DataError, match="5x28x28 = 3920 bytes of data, its gzip trailer says 2352"):
        data.read_idx(path)


def test_dims_whose_product_wraps_around_are_a_data_error(tmp_path):
    path = tmp_path / "images-idx3-ubyte"  # 2**22 x 2**21 x 2**21 is 2**64: 0 in int64
    path.write_bytes(b"".join(n.to_bytes(4, "big") for n in (2051, 2**22, 2**21, 2**21)))
    with pytest.raises(
        DataError, match="4194304x2097152x2097152 = 18,446,744,073,709,551,616 bytes"
    ):
        data.read_idx(path)


def _peak_bytes(read) -> int:
    """The most memory Python allocated while `read()` ran (it raises DataError)."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(DataError) as refused:
            read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, str(refused.value)


@pytest.mark.parametrize("name", ["images-idx3-ubyte.gz", "images-idx3-ubyte"])
def test_a_header_claiming_a_billion_images_is_refused_reading_only_the_file(tmp_path, name):
    path = write_idx(tmp_path / name, np.zeros((100, 28, 28)), count=10**9)
    if not name.endswith(".gz"):  # 200 MB of it, sparse: no disk spent either
        with open(path, "r+b") as handle:
            handle.truncate(200 * 2**20)
    peak, said = _peak_bytes(lambda: data.read_idx(path))
    assert "1000000000x28x28 = 784,000,000,000 bytes of data, above the 4,294,967,295" in said
    assert peak < 2**23  # not the file's 200 MB, nor the 784 GB its header claims
    assert data.train_size("mnist", tmp_path) is None  # its count is no claim to size by


@pytest.mark.parametrize("trailer", ["true", "forged"])
def test_a_gzip_whose_header_claims_more_than_it_holds_is_refused_in_constant_memory(
    tmp_path, trailer
):
    path = write_idx(tmp_path / "images-idx3-ubyte.gz", np.ones((100, 28, 28)), count=10**6)
    if trailer == "forged":  # the length field says what the header claims: read, then caught
        raw = path.read_bytes()
        path.write_bytes(raw[:-4] + (16 + 784 * 10**6).to_bytes(4, "little"))
    peak, said = _peak_bytes(lambda: data.read_idx(path))
    if trailer == "true":  # refused on the header and trailer alone
        assert "1000000x28x28 = 784000000 bytes of data, its gzip trailer says 78400" in said
    else:  # gzip finds the length field false at the data's end
        assert "not a readable gzip file (Incorrect length of data produced)" in said
    assert peak < 2**23  # not the 784 MB the header claims


def test_images_and_labels_must_agree(idx_dir):
    write_idx(idx_dir / "t10k-labels-idx1-ubyte.gz", np.zeros(31))
    with pytest.raises(DataError, match="32 images but 31 labels"):
        data.load("mnist", "test", idx_dir)


def test_missing_dir_and_missing_file(tmp_path, idx_dir):
    with pytest.raises(DataError, match="does not exist"):
        data.load("mnist", "train", tmp_path / "nowhere")
    (idx_dir / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match="no train-labels-idx1-ubyte.gz"):
        data.load("mnist", "train", idx_dir)


def test_digits_is_a_fixed_split_on_a_28x28_canvas():
    train_x, train_y = data.load("digits", "train")
    test_x, test_y = data.load("digits", "test")
    assert train_x.shape == (1438, 28, 28, 1) and test_x.shape == (359, 28, 28, 1)
    assert train_x.max() == 255 and set(np.unique(train_y)) == set(range(10))
    assert not train_x[:, :2].any() and not train_x[:, -2:].any()  # the 2-pixel margin
    np.testing.assert_array_equal(test_y, data.load("digits", "test")[1])


def test_synthetic_is_seeded_and_shaped():
    a = data.load("synthetic", "train", shape=(8, 8, 3), num_classes=2, num_examples=5, seed=1)
    b = data.load("synthetic", "train", shape=(8, 8, 3), num_classes=2, num_examples=5, seed=1)
    assert a[0].shape == (5, 8, 8, 3) and a[1].max() <= 1
    np.testing.assert_array_equal(a[0], b[0])


def test_unknown_dataset_and_split():
    with pytest.raises(UsageError, match="unknown dataset 'cifar'.*digits"):
        data.load("cifar", "train")
    with pytest.raises(UsageError, match="unknown split"):
        data.load("digits", "validation")


def test_tfds_path_reads_mock_data():
    with tfds.testing.mock_data(num_examples=12):
        images, labels = data.load("mnist", "train")
    assert images.shape == (12, 28, 28, 1) and images.dtype == np.uint8
    assert labels.shape == (12,) and labels.dtype == np.int32


def test_tfds_offline_error_names_the_offline_alternatives(tmp_path, monkeypatch):
    """An unprepared dataset goes as far as TFDS's download (every module it needs on
    the way is a declared dependency), which fails here as it does offline."""

    def offline(*args, **kwargs):
        raise ConnectionError("no network in tests")

    for name in ("download", "download_and_extract"):
        monkeypatch.setattr(tfds.download.DownloadManager, name, offline)
    monkeypatch.setattr(data, "_reachable", lambda url: None)  # the probe says online
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    with pytest.raises(
        DataError, match=r"\(no network in tests\).*--data-dir DIR.*--dataset digits"
    ):
        data.load("fashion_mnist", "test")


def test_tfds_without_the_network_fails_before_any_download(tmp_path, monkeypatch, caplog):
    """Offline, TFDS would retry its download for minutes: the probe answers first. The
    error is the one line said: TFDS's warning about the missing files is held back."""
    tried = []
    monkeypatch.setattr(tfds.download.DownloadManager, "download", lambda *a, **k: tried.append(a))
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    probed = []

    def unreachable(url):
        probed.append(url)
        return f"{url} is unreachable: Name or service not known"

    monkeypatch.setattr(data, "_reachable", unreachable)
    with pytest.raises(
        DataError, match=r"not prepared, and https://\S+ is unreachable.*--data-dir"
    ):
        data.load("mnist", "train")
    assert probed == [data.TFDS_DOWNLOAD_PROBE] and tried == []
    assert [r for r in caplog.records if r.name == "absl"] == []


def test_absl_logs_are_held_and_dropped_only_when_the_block_raises(caplog):
    caplog.set_level(logging.INFO, logger="absl")
    absl = logging.getLogger("absl")
    with pytest.raises(DataError), absl_logs_held():
        absl.warning("dropped")
        absl.info("below the level: passes")
        raise DataError("said once, here")
    with absl_logs_held():
        absl.warning("held, then logged")
        assert "held, then logged" not in caplog.messages
    assert caplog.messages == ["below the level: passes", "held, then logged"]


def test_the_reachability_probe_tells_a_dead_address_from_a_live_one():
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.handle_request, daemon=True).start()
    try:  # any answer, a 501 here, means the network is there
        assert data._reachable(f"http://127.0.0.1:{server.server_port}/", timeout=5) is None
    finally:
        server.server_close()
    dead = data._reachable(f"http://127.0.0.1:{server.server_port}/", timeout=2)
    assert dead.startswith(f"http://127.0.0.1:{server.server_port}/ is unreachable")


def test_fit_to_shape_pads_centrally_and_refuses_what_cannot_fit():
    images = np.ones((2, 28, 28, 1), np.uint8)
    padded = data.fit_to_shape(images, (32, 32, 1))
    assert padded.shape == (2, 32, 32, 1) and padded.sum() == images.sum()
    assert padded[0, 2, 2, 0] == 1 and padded[0, 1, 1, 0] == 0
    with pytest.raises(UsageError, match="do not fit"):
        data.fit_to_shape(images, (256, 256, 3))


def test_batches_shuffle_per_epoch_and_pad_the_last_with_mask_zero():
    images = np.arange(10, dtype=np.uint8).reshape(10, 1, 1, 1)
    labels = np.arange(10, dtype=np.int32)
    epoch0 = [b["label"] for b in data.batches(images, labels, 4, seed=3, epoch=0)]
    epoch1 = [b["label"] for b in data.batches(images, labels, 4, seed=3, epoch=1)]
    assert len(epoch0) == 2 and not np.array_equal(np.concatenate(epoch0), np.concatenate(epoch1))
    tail = list(data.batches(images, labels, 4, drop_remainder=False))
    assert len(tail) == 3 and tail[-1]["mask"].tolist() == [1, 1, 0, 0]
    assert sorted(np.concatenate([b["label"][b["mask"] > 0] for b in tail])) == list(range(10))


def test_test_size_is_the_standard_test_split():
    assert data.test_size("digits") == len(data.load("digits", "test")[1]) == 359
    assert data.test_size("synthetic") == len(data.load("synthetic", "test")[1])
    assert data.test_size("mnist") == data.test_size("fashion_mnist") == 10_000
    assert data.test_size("imagenet") is None


def test_train_size_is_what_load_returns_without_reading_it(idx_dir):
    assert data.train_size("digits") == len(data.load("digits", "train")[1]) == 1438
    assert data.train_size("synthetic") == len(data.load("synthetic", "train")[1])
    assert data.train_size("mnist", idx_dir) == len(data.load("mnist", "train", idx_dir)[1]) == 64
    assert data.train_size("mnist") == data.train_size("fashion_mnist") == 60_000  # TFDS's
    assert data.train_size("mnist", idx_dir / "absent") is None  # the loader says why


def _rewrite_count(path, count: int) -> None:
    """`path`'s IDX header claims `count` items; its data is left as it was."""
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[4:8] = count.to_bytes(4, "big")
    path.write_bytes(gzip.compress(bytes(raw)))


@pytest.mark.parametrize("stem", ["train-labels-idx1-ubyte", "train-images-idx3-ubyte"])
def test_train_size_does_not_trust_a_header_its_file_contradicts(idx_dir, stem):
    # Before any work, the run sizes its steps from this count: a header claiming four
    # billion images over a 64-image file must not become a usage error about steps.
    _rewrite_count(idx_dir / f"{stem}.gz", 4_000_000_000)
    assert data.train_size("mnist", idx_dir) is None
    with pytest.raises(DataError, match="header says"):
        data.load("mnist", "train", idx_dir)


def test_train_size_reads_plain_idx_files_and_refuses_two_counts(idx_dir):
    for path in idx_dir.glob("*.gz"):  # the same files uncompressed: the same count
        path.with_suffix("").write_bytes(gzip.decompress(path.read_bytes()))
        path.unlink()
    assert data.train_size("mnist", idx_dir) == 64
    labels = idx_dir / "train-labels-idx1-ubyte"
    raw = labels.read_bytes()  # a consistent labels file of 63: two counts, no answer
    labels.write_bytes(raw[:4] + (63).to_bytes(4, "big") + raw[8:-1])
    assert data.train_size("mnist", idx_dir) is None
