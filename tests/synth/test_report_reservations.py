"""report.md lists capacity reservations and charges them to the idle cost (they bill whether
or not a job runs); a stack without reservations says so."""

from __future__ import annotations

from synth.harness import SynthResult
from synth.report import idle_cost, report


def test_prod_reservation_is_listed_and_charged_while_idle(prod: SynthResult) -> None:
    text = report(prod)
    section = text.split("## Reserved capacity", 1)[1].split("## Idle cost", 1)[0]
    assert "| h100-pretrain |" in section and "| p5.48xlarge | 2 | 16 |" in section
    items = idle_cost(prod).items
    reserved = [i for i in items if i.item.startswith("capacity reservation")]
    assert reserved and reserved[0].count == 2
    assert reserved[0].usd_per_hour > 100  # two p5.48xlarge on-demand hours


def test_dev_has_no_reservation_and_pays_none_while_idle(dev: SynthResult) -> None:
    assert "No capacity reservations" in report(dev)
    assert not [i for i in idle_cost(dev).items if i.item.startswith("capacity reservation")]
