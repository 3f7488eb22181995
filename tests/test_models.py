import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from jaxcnn import models
from jaxcnn.errors import UsageError

# (name, overrides, trainable, non_trainable): the seeds' and papers' published counts.
EXACT_COUNTS = [
    ("lenet5", {}, 61_706, 0),  # 156 + 2,416 + 48,120 + 10,164 + 850, C3 fully connected
    ("lenet5_keras", {}, 81_194, 0),  # seed 002
    ("mnist_cnn", {}, 225_034, 0),  # VALID padding (Keras default)
    ("mnist_cnn", {"padding": "SAME"}, 421_642, 0),
    ("mlp", {}, 669_706, 0),  # width 512
    ("mlp", {"width": 4096}, 20_037_642, 0),  # seed 002
    ("catsdogs_cnn", {}, 21_455_521, 8_192),  # seed 000: 21,463,713 in all
    ("vgg16", {}, 138_357_544, 0),
    ("resnet18", {}, 11_689_512, 9_600),  # torchvision's count; BN running stats on top
    ("resnet50", {}, 25_557_032, 53_120),
    # published JAX loops' networks (rebuilt from the sources jaxcnn/models/published.py cites)
    ("uva_resnet", {}, 272_378, 1_376),
    ("uva_preactresnet", {}, 272_250, 1_344),
    ("uva_googlenet", {}, 259_338, 2_624),
    ("uva_densenet", {}, 239_146, 7_920),
    ("uva_autoencoder", {}, 337_091, 0),  # latent_dim 64, the benchmark's first size
    ("cifar_resnet56", {}, 855_770, 4_256),
]


@pytest.mark.parametrize("name,overrides,trainable,non_trainable", EXACT_COUNTS)
def test_exact_param_counts(name, overrides, trainable, non_trainable):
    assert models.param_counts(name, **overrides) == (trainable, non_trainable)


def test_catsdogs_total_matches_seed():
    assert sum(models.param_counts("catsdogs_cnn")) == 21_463_713


def test_mlp_width_formula():
    for n in (32, 100, 8192):
        expected = 784 * n + n + n * n + n + n * 10 + 10
        assert models.param_counts("mlp", width=n) == (expected, 0)


def test_published_networks_have_their_sources_parameter_counts():
    # Flax's MNIST example CNN: 320 + 18,496 + 3136*256+256 + 2,570 on 28x28x1, and with
    # 3 input channels and a 4096-wide flatten on 32x32x3; the notebook's 2-10-2 MLP.
    assert models.param_counts("flax_mnist_cnn") == (824_458, 0)
    assert models.param_counts("flax_cifar_cnn") == (1_070_794, 0)
    assert models.param_counts("toy_mlp") == (52, 0)
    assert models.input_shape("toy_mlp") == (1, 1, 2)
    # "JAX in Action"'s 784-512-10: 401,920 + 5,130, its notebook's model.tabulate total.
    assert models.param_counts("jia_mlp") == (407_050, 0)
    # ray-jax-tpu-pod-demos's 784-512-256-10: 401,920 + 131,328 + 2,570.
    assert models.param_counts("raypod_mlp") == (535_818, 0)
    # Not mnist_cnn at any padding: max pools and Dense(128) there, not avg and 256.
    assert models.param_counts("mnist_cnn", padding="SAME") == (421_642, 0)


def test_overrides_shrink_imagenet_models_for_32x32():
    assert models.input_shape("resnet18", input_size=32) == (32, 32, 3)
    small, _ = models.param_counts("resnet18", num_classes=10, input_size=32)
    assert small == 11_689_512 - 513 * 990  # only the 1000-way head shrinks to 10
    vgg32, _ = models.param_counts("vgg16", num_classes=10, input_size=32)
    assert vgg32 < 138_357_544  # the first Dense sees 1x1x512 instead of 7x7x512
    assert models.param_counts("resnet_tiny") == (6_226, 144)


def test_every_model_has_a_default_shape_and_runs_abstractly():
    for name in models.names():
        shape = models.input_shape(name)
        module = models.get(name)
        out = jax.eval_shape(
            lambda m=module, s=shape: m.init_with_output(
                jax.random.key(0), jnp.zeros((2, *s)), train=False
            )[0]
        )
        assert out.shape == (2, models.spec(name).num_outputs)


def test_unknown_model_names_the_choices():
    with pytest.raises(UsageError, match="unknown model 'lenet6'.*lenet5_keras"):
        models.get("lenet6")


def test_unknown_override_names_the_options():
    with pytest.raises(UsageError, match="no option depth.*width"):
        models.get("mlp", depth=3)


def test_summary_is_a_keras_like_table_in_call_order():
    text = models.summary("lenet5_keras")
    lines = text.splitlines()
    layers = [line.split()[0] for line in lines if line.startswith(("Conv", "Pool", "Dense"))]
    assert layers == ["Conv_0", "Pool_0", "Conv_1", "Pool_1", "Dense_0", "Dense_1", "Dense_2"]
    assert "(None, 30, 30, 6)" in text and "69,240" in text
    assert lines[-3:] == [
        "Total params: 81,194",
        "Trainable params: 81,194",
        "Non-trainable params: 0",
    ]


REPO = Path(__file__).parent.parent


def test_every_count_docs_models_gives_is_the_models_as_built():
    rows = [r for r in (REPO / "docs/models.md").read_text().splitlines() if r.startswith("| `")]
    checked = 0
    for row in rows:
        first, *_, last = row.strip("|").split("|")
        names = re.findall(r"`(\w+)`", first)
        numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]{3,}", last)]
        if not numbers:  # the shrunk test models: no count given
            continue
        if len(numbers) == len(names):  # `a` / `b`: each one's trainable count
            said = {n: c for n, c in zip(names, numbers, strict=True)}
            built = {n: models.param_counts(n)[0] for n in names}
        else:  # one model: trainable + non-trainable
            said, built = {names[0]: tuple(numbers)}, {names[0]: models.param_counts(names[0])}
        assert said == built, row
        checked += len(names)
    # every registered model has its row; every one but the two shrunk test models and
    # toy_mlp, whose 52 is too short for the pattern (asserted above), has its count
    listed = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert listed == set(models.names())
    assert checked == len(listed - {"vgg_tiny", "resnet_tiny", "toy_mlp"})
