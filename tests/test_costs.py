"""Cloud prices load and are checked like the published references; an epoch's predicted
cost is its time at the price of all the target's chips and their host; a target without
a price gets no cost."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from experiments.predict import references
from experiments.report import figures
from jaxcnn.errors import DataError


def _price(
    chip: str | None, usd_per_hour: float, chips: int = 1, host: str | None = None
) -> references.Price:
    return references.Price(
        id=f"test-{(chip or 'host').lower().replace(' ', '-')}",
        chip=chip,
        chips=chips,
        usd_per_hour=usd_per_hour,
        host=host,
        offering="a test offering",
        provider="a test provider",
        region="test-region1",
        date="2026-01-02",
        date_kind="retrieved",
        source_url="https://example.com/prices",
        quote=f"row,{usd_per_hour}",
        notes="made up for a test",
    )


def _epoch(target: str, epoch_s: float, note: str | None = None) -> dict:
    """A predicted epoch of mnist_cnn on `target`, as the table holds one."""
    w = {"model": "mnist_cnn", "batch": 128, "precision": "f32", "placement": "single",
         "device": target, "devices": 1, "platform": "gpu"}  # fmt: skip
    return figures.row("epoch_s", "predicted", epoch_s, w, "epoch-from-step", note=note)


def _costs(rows: list[dict], prices: list[references.Price]) -> dict[str, float]:
    found = figures.cost_rows(figures.frame(rows), references.chip_prices(prices))
    return {r["device"]: r["value"] for r in found if r["quantity"] == "usd_per_epoch"}


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(rows))
    return path


def _refused(tmp_path: Path, rows: list[dict]) -> str:
    with pytest.raises(DataError) as caught:
        references.load_prices(_write(tmp_path, rows))
    message = str(caught.value)
    assert "\n" not in message
    return message


def _committed_row() -> dict:
    row = next(p for p in references.load_prices() if p.chip == "L4")  # its host included
    return dataclasses.asdict(row)


def test_the_committed_prices_load_one_per_chip():
    prices = references.load_prices()
    assert {"T4", "A100", "H100 SXM", "TPU v5e", "TPU v6e"} <= {p.chip for p in prices}
    assert len({p.chip for p in prices}) == len(prices)
    v5e = next(p for p in prices if p.chip == "TPU v5e")
    assert references.chip_prices(prices)["TPU v5e"].usd_per_chip_hour == v5e.usd_per_hour / 8
    t4 = references.chip_prices(prices)["T4"]  # priced alone: its N1 host VM on top
    assert t4.host is not None and t4.usd_per_chip_hour == t4.price.usd_per_hour + (
        t4.host.usd_per_hour
    )


def test_a_good_row_loads_from_its_own_file(tmp_path):  # the control for the refusals
    assert [p.chip for p in references.load_prices(_write(tmp_path, [_committed_row()]))] == ["L4"]


def test_a_price_not_in_its_quote_is_refused_naming_the_row_and_the_file(tmp_path):
    row = {**_committed_row(), "usd_per_hour": 0.53}  # not the quoted 0.706832255
    message = _refused(tmp_path, [row])
    assert message.startswith(f"prices.json: row {row['id']!r}: usd_per_hour 0.53")


def test_a_bad_field_is_refused_in_one_line(tmp_path):
    row = _committed_row()
    assert "chips must be a positive whole number" in _refused(tmp_path, [{**row, "chips": 0}])
    assert "host 'no-such-vm' is not the id of a host VM's row here" in _refused(
        tmp_path, [{**row, "host": "no-such-vm"}]
    )
    assert "date must be a YYYY-MM-DD date" in _refused(tmp_path, [{**row, "date": "25/11/2026"}])
    assert "not a name in jaxcnn.devices' chip table" in _refused(tmp_path, [{**row, "chip": "T5"}])
    second = {**row, "id": "another-l4"}
    assert "prices chip 'L4' again" in _refused(tmp_path, [row, second])


def test_an_epoch_costs_its_time_at_the_price_of_every_chip_and_its_host():
    t4_host = _price(None, 0.5)
    prices = [
        _price("T4", 0.35, host=t4_host.id),  # priced alone: its host VM on top
        t4_host,
        _price("TPU v5e", 9.6, chips=8),  # a slice's price, for eight chips
    ]
    costs = _costs([_epoch("gpu-t4", 3600.0), _epoch("tpu-v5e-8", 1800.0)], prices)
    assert costs["gpu-t4"] == pytest.approx(0.35 + 0.5)  # one hour of the chip and its VM
    assert costs["tpu-v5e-8"] == pytest.approx(9.6 / 8 * 8 / 2)  # half an hour of 8 chips


def test_each_priced_epoch_is_set_over_the_cheapest_of_its_program():
    prices = [_price("T4", 0.35), _price("TPU v5e", 9.6, chips=8)]
    epochs = figures.frame([_epoch("gpu-t4", 3600.0), _epoch("tpu-v5e-8", 1800.0)])
    found = figures.cost_rows(epochs, references.chip_prices(prices))
    usd = {r["device"]: r for r in found if r["quantity"] == "usd_per_epoch"}
    (ratio,) = [r for r in found if r["quantity"] == "cost_ratio"]
    # the dearer over the cheapest, naming both rows
    assert ratio["device"] == "tpu-v5e-8" and ratio["value"] == pytest.approx(4.8 / 0.35)
    assert (ratio["numerator"], ratio["denominator"]) == (
        usd["tpu-v5e-8"]["id"],
        usd["gpu-t4"]["id"],
    )
    # the control: one priced epoch alone has nothing to be dearer than
    alone = figures.cost_rows(
        figures.frame([_epoch("gpu-t4", 3600.0)]), references.chip_prices(prices)
    )
    assert [r["quantity"] for r in alone] == ["usd_per_epoch"]


def test_a_target_without_a_price_gets_no_cost_and_a_partial_epoch_says_so():
    prices = [_price("T4", 1.0)]
    found = figures.cost_rows(
        figures.frame([_epoch("gpu-k80", 60.0), _epoch("gpu-t4", 36.0, note="left out: put")]),
        references.chip_prices(prices),
    )
    assert [r["device"] for r in found] == ["gpu-t4"]  # the K80 has no public price
    assert found[0]["value"] == pytest.approx(0.01) and "left out: put" in found[0]["note"]


def test_docs_list_every_price_with_its_quote_and_source():
    page = (Path(__file__).resolve().parents[1] / "docs" / "references.md").read_text()
    for price in references.load_prices():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{price.id}` |"))
        assert f"{price.usd_per_hour!r}" in row
        assert f"`{price.quote}`" in row and price.source_url in row and price.date in row


def test_a_batch_past_the_training_set_has_no_epoch_and_no_price():
    def step(batch: int) -> dict:
        w = {"model": "mnist_cnn", "batch": batch, "precision": "f32", "placement": "single",
             "device": "gpu-t4", "devices": 1, "platform": "gpu", "extra": "-"}  # fmt: skip
        return figures.row("loop_step_s", "predicted", 0.5, w, "per-kernel")

    epochs = figures.epochs_from_steps(figures.frame([step(70_000), step(128)]))
    # MNIST's 60,000 images: none of 70,000 fill a step; the control, 468 of 128
    assert [(r["batch"], r["extra"]) for r in epochs] == [(128, "468 steps of loop_step_s")]
