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
