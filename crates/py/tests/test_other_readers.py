"""NautilusTrader reads tickplant's DBN and its catalog, hftbacktest its DBN. Their packages
are large (NautilusTrader also pins another pandas) and not in requirements-dev.txt: these
tests run where they are installed (a virtual environment of their own, say
`python -m venv nt && nt/bin/pip install nautilus_trader hftbacktest databento pytest`, with
the tickplant package built into it: `nt/bin/pip install ./crates/py`) and are skipped
otherwise."""

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
                    str(d / "day.pcap"), "--truth", str(d / "truth.jsonl")], check=True, capture_output=True)
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
    # Without an instrument id given, the loader names each instrument by the records'
    # publisher (XNAS.ITCH.XNAS): SYMBOL.XNAS.
    every = DatabentoDataLoader().from_dbn_file(str(day / "day.mbo.dbn.zst"), as_legacy_cython=False)
    assert {str(d.instrument_id) for d in every} == {f"{s}.XNAS" for i, s in ev.symbols.items() if i}


def test_hftbacktest_converts_it(day):
    pytest.importorskip("hftbacktest")
    pytest.importorskip("databento")
    from hftbacktest.data.utils import databento as hdb

    ev = tickplant.read(day / "day.pcap", date=DATE)
    iid = next(i for i, s in ev.symbols.items() if s == "AAAA")
    out = hdb.convert(str(day / "day.mbo.dbn.zst"), symbol="AAAA")
    mine = ev[(ev["instrument_id"] == iid) & np.isin(ev["action"], [1, 2, 3, 4, 5])]
    assert len(out) > 0 and set(out["order_id"].tolist()) <= set(mine["order_id"].tolist()) | set(mine["aux"].tolist())


def test_nautilus_trader_catalog_builds_the_books(day):
    pytest.importorskip("nautilus_trader")
    import json

    from nautilus_trader.model.book import OrderBook
    from nautilus_trader.model.enums import BookType
    from nautilus_trader.model.identifiers import InstrumentId
    from nautilus_trader.persistence.catalog import ParquetDataCatalog

    tickplant.export(day / "day.pcap", "nautilus", day / "catalog", date=DATE)
    ev = tickplant.read(day / "day.pcap", date=DATE)
    catalog = ParquetDataCatalog(str(day / "catalog"))
    truth = [json.loads(line) for line in (day / "truth.jsonl").read_text().splitlines()]
    for t in truth:
        iid = InstrumentId.from_str(t["symbol"] + ".XNAS")
        book = OrderBook(iid, BookType.L3_MBO)
        for d in catalog.order_book_deltas(instrument_ids=[str(iid)]):
            book.apply_delta(d)
        for levels, key in ((book.bids(), "bids"), (book.asks(), "asks")):
            got = [(round(float(l.price) * 1e9), round(float(l.size())), len(l.orders())) for l in levels]
            assert got == [(round(p * 1e9), s, n) for p, s, n in t[key]], (t["symbol"], key)
        tid = next(i for i, s in ev.symbols.items() if s == t["symbol"])
        trades = catalog.trade_ticks(instrument_ids=[str(iid)])
        printed = (ev["flags"] & 0x08) == 0
        assert len(trades) == int(((ev["instrument_id"] == tid) & np.isin(ev["action"], [5, 6]) & printed).sum())
