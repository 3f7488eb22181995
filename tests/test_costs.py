"""Cloud prices load and are checked like the published references; an epoch's predicted
cost is steps x step x price / 3600; a target without a price says so; the verdict picks
the cheaper and the faster of two targets."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from experiments import references
from experiments.studies import devices
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


def _compiled(target: str, chip: str, step_s: float, model: str = "mnist_cnn") -> dict:
    """A compile-only record of `model` at the cost batch on a one-chip GPU target whose
    per-kernel prediction is `step_s`, unvalidated (no error band)."""
    batch = devices.COST_BATCH
    return {
        "workload": {
            "model": model,
            "batch_size": batch,
            "precision": "f32",
            "kind": "compile",
            "study": "targets",
            "target": target,
        },
        "status": "ok",
        "fits": True,
        "compiled_not_run": True,
        "target": {"name": target, "chip": chip, "chips": 1, "devices": 1, "platform": "gpu"},
        "device": {"platform": "gpu", "kind": chip, "count": 1},
        "env": {"utc_time": "2026-11-25T00:00:00Z"},
        "prediction": {
            "method": "per-kernel",
            "step_time_s": step_s,
            "images_per_s": batch / step_s,
            "error_band": None,
            "host_left_out": [],
        },
    }


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


def test_an_epoch_costs_its_steps_times_the_step_times_the_price():
    record = _compiled("gpu-t4", "T4", step_s=0.002)
    [cost] = devices.epoch_costs([record], [_price("T4", 0.36)])
    assert cost.steps == 60_000 // 128 == 468
    assert cost.usd == 468 * 0.002 * 0.36 / 3600
    assert cost.usd == pytest.approx(9.36e-5, rel=1e-12)


def test_a_chip_priced_alone_pays_for_its_host_vm_too():
    host = _price(None, 0.19)
    record = _compiled("gpu-t4", "T4", step_s=0.002)
    [cost] = devices.epoch_costs([record], [_price("T4", 0.35, host=host.id), host])
    assert cost.usd_per_hour == (0.35 + 0.19) / 1
    assert cost.usd == 468 * 0.002 * ((0.35 + 0.19) / 1) / 3600


def test_a_slice_pays_for_all_its_chips():
    price = references.chip_prices([_price("TPU v5e", 9.6, chips=8)])["TPU v5e"]
    assert price.usd_per_chip_hour == 1.2  # a price quoted for 8 chips
    assert devices.epoch_cost_usd(468, 0.001, price.usd_per_chip_hour * 4) == (
        468 * 0.001 * 4.8 / 3600
    )


def test_a_target_without_a_price_says_so_and_one_with_a_price_gets_its_cost():
    records = [_compiled("gpu-t4", "T4", 0.002), _compiled("gpu-l4", "L4", 0.001)]
    text = devices.costs_section(records, [_price("T4", 0.36)])
    row = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| gpu")}
    assert "no public price found" in row["| gpu-l4"]
    assert "no public price found" not in row["| gpu-t4"]
    assert devices.fmt_usd(468 * 0.002 * 0.36 / 3600) in row["| gpu-t4"]
    assert "No public price found for gpu-l4." in text


def test_the_verdict_picks_the_cheaper_and_the_faster_of_two_targets():
    # the L4 runs the step twice as fast, the T4 costs less per epoch
    records = [_compiled("gpu-t4", "T4", 0.002), _compiled("gpu-l4", "L4", 0.001)]
    prices = [_price("T4", 0.36), _price("L4", 1.0)]
    winners = devices.per_dollar_winners(records, prices)["mnist_cnn"]
    assert winners.cheapest is not None and winners.cheapest.target == "gpu-t4"
    assert winners.fastest.target == "gpu-l4"
    sentence = devices.verdict_sentence(records, prices)
    assert "mnist_cnn fastest per chip on gpu-l4 (GPU, 128,000 images/s per chip" in sentence
    assert "cheapest on gpu-t4 (GPU, $0.0000936 per epoch; unvalidated)" in sentence


def test_with_no_price_at_all_nothing_is_cheapest():
    records = [_compiled("gpu-t4", "T4", 0.002)]
    assert devices.per_dollar_winners(records, [])["mnist_cnn"].cheapest is None


def test_docs_list_every_price_with_its_quote_and_source():
    page = (Path(__file__).resolve().parents[1] / "docs" / "references.md").read_text()
    for price in references.load_prices():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{price.id}` |"))
        assert f"{price.usd_per_hour!r}" in row
        assert f"`{price.quote}`" in row and price.source_url in row and price.date in row


def test_a_winner_whose_prediction_leaves_out_host_work_says_so():
    fast = _compiled("gpu-l4", "L4", 0.001)
    fast["prediction"]["host_left_out"] = ["dispatch (not measured for this placement)"]
    records = [_compiled("gpu-t4", "T4", 0.002), fast]
    sentence = devices.verdict_sentence(records, [_price("T4", 0.36), _price("L4", 1.0)])
    assert "gpu-l4 (GPU, 128,000 images/s per chip; unvalidated; host side partly left out)" in (
        sentence
    )
    assert "gpu-t4 (GPU, $0.0000936 per epoch; unvalidated)" in sentence
