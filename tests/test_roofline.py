import pytest

from jaxcnn.perf import roofline


def test_the_larger_side_bounds_the_step():
    compute = roofline.predict(4e12, 1e9, 2e12, 1e11)  # 2 s of arithmetic, 0.01 s of traffic
    assert compute == {"seconds": 2.0, "compute_s": 2.0, "memory_s": 0.01, "bound": "compute"}
    memory = roofline.predict(1e9, 4e11, 1e12, 1e11)  # 1 ms of arithmetic, 4 s of traffic
    assert memory["bound"] == "memory" and memory["seconds"] == pytest.approx(4.0)


@pytest.mark.parametrize("flops, bytes_", [(-1, 1e9), (None, 1e9)])
def test_a_missing_or_failed_count_leaves_the_other_side(flops, bytes_):
    assert roofline.predict(flops, bytes_, 1e12, 1e11) == {
        "seconds": 0.01,
        "compute_s": None,
        "memory_s": 0.01,
        "bound": "memory",
    }


def test_nothing_to_predict_from_is_none():
    assert roofline.predict(None, -1, 1e12, None) is None
