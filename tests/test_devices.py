import pytest

from jaxcnn import devices
from jaxcnn.errors import UsageError


def test_auto_and_cpu_resolve_to_the_fake_cpu_devices():
    assert len(devices.resolve("auto")) == 8
    assert [d.platform for d in devices.resolve("cpu", 3)] == ["cpu"] * 3
    assert devices.available_platforms() == ["cpu"]


@pytest.mark.parametrize("absent", ["tpu", "gpu"])
def test_absent_platform_names_what_is_present(absent):
    with pytest.raises(UsageError, match=rf"--device={absent}.*present: cpu"):
        devices.resolve(absent)


def test_a_platform_jax_platforms_leaves_out_names_the_variable(monkeypatch):
    # conftest sets JAX_PLATFORMS=cpu: JAX is never asked to look for a GPU
    with pytest.raises(UsageError, match="--device=gpu.*JAX_PLATFORMS=cpu in the environment"):
        devices.resolve("gpu")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu,cuda")  # a positive control: gpu is named
    with pytest.raises(UsageError, match="JAX sees no GPU here") as refused:
        devices.resolve("gpu")
    # the way to a GPU: its JAX build where one is, a compile for one where none is
    assert 'install JAX\'s GPU build (pip install -e ".[cuda]")' in str(refused.value)
    assert "--target=gpu-t4" in str(refused.value)


def test_unknown_device_lists_choices():
    with pytest.raises(UsageError, match="unknown device 'quantum'.*auto, cpu, gpu, tpu"):
        devices.resolve("quantum")


def test_more_devices_than_present():
    with pytest.raises(UsageError, match="--num-devices=9 but only 8 cpu"):
        devices.resolve("cpu", 9)


def test_describe_counts_devices_and_processes():
    described = devices.describe(devices.resolve("cpu", 2))
    assert described["platform"] == "cpu" and described["count"] == 2
    assert described["process_count"] == 1 and described["kind"]
