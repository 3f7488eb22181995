"""benchmarks/peers.py's command line, in the JAX venv (the peers' frameworks are not
installed in CI): each mistake is one line and exit code 2, and nothing is written;
the command line reads as paired.py's (benchmarks/command_line.py)."""

import pytest

from benchmarks import command_line, peers
from experiments import records


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--models", "resnet,mlp"], "unknown model resnet; one of lenet5_keras, mnist_cnn, mlp"),
        (["--batch-sizes", "32,x"], "--batch-sizes '32,x' is not a list of integers"),
        (["--batch-sizes", "0"], "each batch size must be >= 1"),
        (["--frameworks", "jax"], "unknown framework jax; one of torch, keras"),
        (["--modes", "eager,graph", "--frameworks", "torch"], "mode graph belongs to no chosen"),
        (["--repeats", "2"], "--repeats 2: must be >= 5"),
        (["--out", "/dev/null/results"], "cannot write to --out /dev/null"),
    ],
)
def test_a_bad_command_line_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert peers.main(["--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / records.RECORDS_FILE).exists()


def test_the_lists_keep_the_order_given_and_drop_repeats():
    assert command_line.names("mlp, lenet5_keras,mlp", command_line.MODELS, "model") == [
        "mlp",
        "lenet5_keras",
    ]
    assert command_line.batch_sizes("512,32") == [512, 32]


class _Unmeasured(peers.Framework):
    name, module, modes, pip = "torch", "torch", ("eager",), "pip install torch"

    def measure(self, *args):
        raise RuntimeError("not measured here")


def _record(threads, host_memory, env_vars):
    env = peers.environment({}, threads, {"policy": host_memory}) | {"env_vars": env_vars}
    args = type("Args", (), {"steps": 3, "repeats": 5})
    return peers.run_one(_Unmeasured(), env, "mlp", 32, "eager", args)


def test_a_peer_record_keys_the_conditions_it_was_measured_under():
    plain = _record(None, peers.DEFAULT_HOST_MEMORY, {})
    assert "conditions" not in plain  # the defaults: the key records had before
    assert plain["config_key"] == records.config_key(plain["workload"], plain["device"])
    others = [
        _record(2, peers.DEFAULT_HOST_MEMORY, {}),
        _record(None, "system", {}),
        _record(None, peers.DEFAULT_HOST_MEMORY, {"OMP_NUM_THREADS": "1"}),
    ]
    assert [r["conditions"] for r in others] == [
        {"threads": 2},
        {"host_memory": "system"},
        {"env_vars": {"OMP_NUM_THREADS": "1"}},
    ]
    keys = {plain["config_key"], *(r["config_key"] for r in others)}
    assert len(keys) == 4
    for r in (plain, *others):
        records.validate(r)  # each key is the hash of its workload, device and conditions


def test_a_peer_record_names_the_machine_and_boot_as_a_jax_record_does():
    # so a peer's records and the bench's of one boot and clean tree are one sitting
    from jaxcnn import devices

    device = peers.device_of()
    assert (device["machine"], device["boot"]) == (devices.machine_id(), devices.boot_id())
    assert device["machine"] and len(device["machine"]) == 16
