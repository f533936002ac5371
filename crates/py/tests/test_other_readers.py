"""NautilusTrader and hftbacktest read tickplant's DBN. Their packages are large and not in
requirements-dev.txt: these tests run where they are installed
(`.venv/bin/pip install nautilus_trader hftbacktest databento`) and are skipped otherwise."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import tickplant

ROOT = pathlib.Path(__file__).resolve().parents[3]
BIN = os.environ.get("TICKPLANT_BIN", str(ROOT / "target" / "debug" / "tickplant"))
DATE = "2026-11-20"


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    d = tmp_path_factory.mktemp("readers")
    subprocess.run([BIN, "sim", "itch", "--messages", "50000", "--symbols", "20", "--date", DATE, "--out",
                    str(d / "day.pcap")], check=True, capture_output=True)
    tickplant.export(d / "day.pcap", "dbn", d / "day.mbo.dbn.zst", date=DATE)
    return d


def test_nautilus_trader_loads_the_deltas(day):
    pytest.importorskip("nautilus_trader")
    from nautilus_trader.adapters.databento.loaders import DatabentoDataLoader
    from nautilus_trader.model.identifiers import InstrumentId

    ev = tickplant.read(day / "day.pcap", date=DATE)
    iid = next(i for i, s in ev.symbols.items() if s == "AAAA")
    deltas = DatabentoDataLoader().from_dbn_file(
        str(day / "day.mbo.dbn.zst"), instrument_id=InstrumentId.from_str("AAAA.XNAS"), as_legacy_cython=False
    )
    adds = [d for d in deltas if d.action.name == "ADD" and d.order.order_id in set(
        ev["order_id"][(ev["instrument_id"] == iid) & (ev["action"] == 1)].tolist())]
    assert len(adds) > 0


def test_hftbacktest_converts_it(day):
    pytest.importorskip("hftbacktest")
    pytest.importorskip("databento")
    from hftbacktest.data.utils import databento as hdb

    ev = tickplant.read(day / "day.pcap", date=DATE)
    iid = next(i for i, s in ev.symbols.items() if s == "AAAA")
    out = hdb.convert(str(day / "day.mbo.dbn.zst"), symbol="AAAA")
    mine = ev[(ev["instrument_id"] == iid) & np.isin(ev["action"], [1, 2, 3, 4, 5])]
    assert len(out) > 0 and set(out["order_id"].tolist()) <= set(mine["order_id"].tolist()) | set(mine["aux"].tolist())
