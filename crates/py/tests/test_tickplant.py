"""The Python package against independent views of the same files: the command line's
decoders (`tickplant decode`, `tickplant itch decode`), the simulator's truth,
Databento's `databento-dbn`, pyarrow and polars.

The `tickplant` binary is $TICKPLANT_BIN, or the workspace's debug build.
"""

import collections
import datetime as dt
import json
import os
import pathlib
import struct
import subprocess
import zoneinfo

import numpy as np
import pytest

import tickplant

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data"
BIN = os.environ.get("TICKPLANT_BIN", str(ROOT / "target" / "debug" / "tickplant"))
DATE = "2026-11-20"


def cli(*args, capture=True):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"tickplant {' '.join(map(str, args))}: {r.stderr}"
    return r.stdout


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def midnight_ns(date):
    d = dt.datetime.fromisoformat(date).replace(tzinfo=zoneinfo.ZoneInfo("America/New_York"))
    return int(d.timestamp()) * 1_000_000_000


@pytest.fixture(scope="session")
def day(tmp_path_factory):
    d = tmp_path_factory.mktemp("day")
    cli("sim", "itch", "--messages", 60000, "--symbols", 40, "--date", DATE, "--out", d / "day.pcap",
        "--truth", d / "truth.jsonl")
    cli("sim", "itch", "--messages", 60000, "--symbols", 40, "--date", DATE, "--out", d / "day.itch.gz")
    return d


def test_the_stubs_are_the_native_modules():
    """_native.pyi (what editors and type checkers read) names every function, class and
    method of the Rust module, with the parameters it takes."""
    import ast
    import inspect
    native = tickplant._native
    tree = ast.parse((pathlib.Path(tickplant.__file__).parent / "_native.pyi").read_text())

    def params(fn):
        a = fn.args
        return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg != "self"]

    def actual(obj):
        return [p for p in inspect.signature(obj).parameters if p != "self"]

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert params(node) == actual(getattr(native, node.name)), node.name
        elif isinstance(node, ast.ClassDef):
            cls = getattr(native, node.name)
            stubbed = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
            public = {m for m, v in vars(cls).items() if not m.startswith("_") and callable(v)}
            assert public <= stubbed, (node.name, public - stubbed)
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and not f.name.startswith("__") and f.name in public:
                    assert params(f) == actual(getattr(cls, f.name)), (node.name, f.name)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    public = {m for m in dir(native) if not m.startswith("_") and callable(getattr(native, m))}
    assert public <= names, public - names


def test_dtype_is_the_rust_layout():
    layout = tickplant._native.event_layout()
    assert tickplant.EVENT_DTYPE.itemsize == tickplant._native.EVENT_BYTES == 64
    for name, offset, size in layout:
        f = tickplant.EVENT_DTYPE.fields[name]
        assert (f[1], f[0].itemsize) == (offset, size), name
    assert [n for n, _, _ in layout] == list(tickplant.EVENT_DTYPE.names)


def itch_expect(f, ty, midnight):
    """The event fields a decoded ITCH message gives, from the CLI's decode."""
    e = {"instrument_id": f["stock_locate"], "ts_event": midnight + f["timestamp"], "msg_type": ord(ty)}
    side = {"B": 1, "S": 2}
    if ty in "AF":
        e.update(action=1, order_id=f["order_reference_number"], side=side[f["buy_sell_indicator"]],
                 size=f["shares"], price=f["price"] * 100000)
    elif ty in "EC":
        e.update(action=5, order_id=f["order_reference_number"], size=f["executed_shares"], aux=f["match_number"])
    elif ty == "X":
        e.update(action=2, order_id=f["order_reference_number"], size=f["cancelled_shares"])
    elif ty == "D":
        e.update(action=3, order_id=f["order_reference_number"])
    elif ty == "U":
        e.update(action=4, order_id=f["new_order_reference_number"], aux=f["original_order_reference_number"],
                 size=f["shares"], price=f["price"] * 100000)
    elif ty == "P":
        e.update(action=6, order_id=f["order_reference_number"], size=f["shares"], price=f["price"] * 100000,
                 aux=f["match_number"], side=side[f["buy_sell_indicator"]])
    return e


def test_capture_read_equals_the_cli_decode(day):
    ev = tickplant.read(day / "day.pcap", feed="itch50", date=DATE)
    lines = jsonl(cli("decode", "--feed", "itch50", day / "day.pcap"))
    assert len(ev) == len(lines) == 60000
    m = midnight_ns(DATE)
    for e, line in zip(ev, lines):
        assert e["sequence"] == line["sequence"]
        for k, v in itch_expect(line["fields"], line["type"], m).items():
            assert e[k] == v, (line, k)
    assert ev.symbols[1] == "AAAA"


def test_binaryfile_read_equals_the_capture(day):
    """The gzip BinaryFILE of the same day: the same events but for the packet's
    receive time, sequence number and last-in-packet flag."""
    a = tickplant.read(day / "day.pcap", date=DATE)
    b = tickplant.read(day / "day.itch.gz", date=DATE)
    assert len(a) == len(b)
    for name in ("ts_event", "order_id", "price", "aux", "size", "instrument_id", "action", "side", "msg_type"):
        assert np.array_equal(a[name], b[name]), name
    assert np.array_equal(a["flags"] & 0x7F, b["flags"] & 0x7F)
    assert np.array_equal(b["sequence"], np.arange(1, len(b) + 1))


def test_chunks_concatenate_to_the_whole(day):
    whole = tickplant.read(day / "day.pcap", date=DATE)
    parts = list(tickplant.read(day / "day.pcap", date=DATE, chunk=7777))
    assert [len(p) for p in parts[:-1]] == [7777] * (len(parts) - 1)
    assert np.array_equal(np.concatenate(parts), whole)


def test_filters(day):
    whole = tickplant.read(day / "day.pcap", date=DATE)
    ids = [k for k, v in whole.symbols.items() if v in ("AAAB", "AAAC")]
    got = tickplant.read(day / "day.pcap", date=DATE, symbols=["AAAB", "AAAC"], types=["add", "E"])
    want = whole[np.isin(whole["instrument_id"], ids) & ((whole["action"] == 1) | (whole["msg_type"] == ord("E")))]
    assert len(got) > 100
    assert np.array_equal(got, want)
    # One name given alone is that name, not its letters.
    one = tickplant.read(day / "day.pcap", date=DATE, symbols="AAAB", types="add")
    aaab = [k for k, v in whole.symbols.items() if v == "AAAB"]
    want = whole[np.isin(whole["instrument_id"], aaab) & (whole["action"] == 1)]
    assert len(one) > 10
    assert np.array_equal(one, want)
    # A symbol the file never names is most likely a typo: a warning names it, and only it.
    with pytest.warns(UserWarning, match=r"symbols ZZZZ: the feed never named them") as w:
        both = tickplant.read(day / "day.pcap", date=DATE, symbols=["AAAB", "ZZZZ"], types="add")
    assert np.array_equal(both, want) and not any("AAAB" in str(x.message) for x in w)


def test_books_and_bbo_equal_the_simulators_truth(day):
    ev = tickplant.read(day / "day.pcap", date=DATE)
    books = tickplant.Books()
    bbo = books.apply_bbo(ev)
    assert len(bbo) == len(ev)
    truth = jsonl((day / "truth.jsonl").read_text())
    by_symbol = {v: k for k, v in ev.symbols.items()}
    for t in truth:
        iid = by_symbol[t["symbol"]]
        for side, key in (("bid", "bids"), ("ask", "asks")):
            got = books.depth(iid, side, 1000)
            want = [(round(p * 1e9), s, n) for p, s, n in t[key]]
            assert got == want, (t["symbol"], side)
        last = bbo[bbo["instrument_id"] == iid][-1]
        bp, bs, ap, as_ = books.bbo(iid)
        assert (last["bid_price"], last["bid_size"], last["ask_price"], last["ask_size"]) == (bp, bs, ap, as_)
    # Sampled by time: the last BBO of each second of one instrument, the last of them the
    # instrument's last.
    iid = by_symbol["AAAA"]
    s = tickplant.bbo_series(ev, instrument_id=iid, every="1s")
    mine = bbo[bbo["instrument_id"] == iid]
    seconds = np.unique(mine["ts_event"] // 1_000_000_000)
    assert 0 < len(s) <= len(seconds)
    for k in ("bid_price", "bid_size", "ask_price", "ask_size"):
        assert s.iloc[-1][k] == mine[-1][k], k


def test_frames(day):
    ev = tickplant.read(day / "day.pcap", date=DATE)
    pdf = ev.to_pandas()
    assert str(pdf["ts_event"].dtype) == "datetime64[ns, UTC]"
    assert pdf["ts_event"].iloc[0].value == int(ev["ts_event"][0])
    assert pdf["price"].dtype == np.float64
    exact = ev.to_pandas(prices="int")
    assert exact["price"].dtype == np.int64 and np.array_equal(exact["price"].to_numpy(), ev["price"])
    assert set(pdf["action"]) <= set(tickplant.ACTIONS.values())
    pl = ev.to_polars()
    assert str(pl.schema["ts_recv"]).startswith("Datetime")
    assert pl.height == len(ev)
    assert pl["symbol"][int(np.argmax(ev["instrument_id"] == 1))] == "AAAA"
    # Equities: an instrument is its symbol, and the frames have no column more.
    assert ev.instruments == ev.symbols and "instrument" not in pdf.columns
    # Every action by its name, the last (trusted) included.
    every = np.zeros(len(tickplant.ACTIONS), dtype=tickplant.EVENT_DTYPE).view(tickplant.EventArray)
    every["action"] = list(tickplant.ACTIONS)
    assert list(every.to_pandas()["action"]) == list(tickplant.ACTIONS.values())


def mbo_records(ev):
    """The MBO records docs/python.md's table gives for each event: an implementation of
    the mapping apart from the library's."""
    orders, out = {}, []
    for e in ev:
        a, oid, px, sz = int(e["action"]), int(e["order_id"]), int(e["price"]), int(e["size"])
        applied = e["flags"] & 0x30 == 0
        side = "NBA"[e["side"]]
        last = bool(e["flags"] & 0x80)
        rec = lambda act, o, p, s, l=last: (act, side, o, p, s, int(e["instrument_id"]), int(e["ts_event"]),
                                            int(e["ts_recv"]), int(e["sequence"]) & 0xFFFFFFFF, l)
        if a == 1:
            if applied:
                orders[oid] = [px, sz]
            out.append(rec("A", oid, px, sz))
        elif a in (2, 3):
            p = orders.get(oid, [px])[0]
            if oid in orders:
                if a == 3 or sz >= orders[oid][1]:
                    del orders[oid]
                else:
                    orders[oid][1] -= sz
            out.append(rec("C", oid, p, sz))
        elif a == 5:
            out.append(rec("F", oid, px, sz, False if applied else last))
            if applied:
                p = orders.get(oid, [px])[0]
                if oid in orders:
                    if sz >= orders[oid][1]:
                        del orders[oid]
                    else:
                        orders[oid][1] -= sz
                out.append(rec("C", oid, p, sz))
        elif a == 4:
            old = int(e["aux"])
            if old in orders:
                p, s = orders.pop(old)
                out.append(rec("C", old, p, s, False))
            if applied:
                orders[oid] = [px, sz]
            out.append(rec("A", oid, px, sz))
        elif a == 6:
            out.append(rec("T", oid, px, sz))
    return out


def test_dbn_read_back_by_databento(day, tmp_path):
    dbn = pytest.importorskip("databento_dbn")
    ev = tickplant.read(day / "day.pcap", date=DATE)
    report = tickplant.export(day / "day.pcap", "dbn", tmp_path / "day.dbn", date=DATE)
    dec = dbn.DBNDecoder()
    dec.write((tmp_path / "day.dbn").read_bytes())
    recs = dec.decode()
    meta, recs = recs[0], recs[1:]
    assert str(meta.schema).lower().endswith("mbo") and meta.dataset == "XNAS.ITCH"
    # Databento's publisher of the dataset, XNAS.ITCH.XNAS: readers tell the venue by it.
    assert {r.publisher_id for r in recs[1:]} == {2}
    want = mbo_records(ev)
    assert len(recs) == len(want) == report["records"]
    for r, w in zip(recs, want):
        got = (r.action, r.side, r.order_id, r.price, r.size, r.instrument_id, r.ts_event, r.ts_recv, r.sequence,
               bool(r.flags & 0x80))
        assert got == w
    # And back to events, in the fields MBO carries.
    back = tickplant.read_dbn(tmp_path / "day.dbn")
    kept = np.asarray(ev)[np.isin(ev["action"], [1, 2, 3, 4, 5, 6, 7])].copy()
    kept["sequence"] &= 0xFFFFFFFF
    kept["aux"] = np.where(kept["action"] == 4, kept["aux"], 0)
    kept["flags"] &= 0xC0
    kept["msg_type"] = 0
    kept["venue"] = 0
    assert np.array_equal(np.asarray(back), kept)
    # The symbology: every symbol to its instrument id.
    for iid, sym in ev.symbols.items():
        if iid:
            assert meta.mappings[sym][0]["symbol"] == str(iid)
    # A book builder of DBN's actions (A adds, C takes shares) ends at the simulator's books.
    orders = {}
    for r in recs:
        if r.action == "A":
            orders[r.order_id] = [r.instrument_id, r.side, r.price, r.size]
        elif r.action == "C":
            orders[r.order_id][3] -= r.size
            if orders[r.order_id][3] == 0:
                del orders[r.order_id]
    levels = collections.defaultdict(collections.Counter)
    for iid, side, px, sz in orders.values():
        levels[(iid, side)][px] += sz
    by_symbol = {v: k for k, v in ev.symbols.items()}
    for t in jsonl((day / "truth.jsonl").read_text()):
        iid = by_symbol[t["symbol"]]
        for side, key in (("B", "bids"), ("A", "asks")):
            want_levels = {round(p * 1e9): s for p, s, _ in t[key]}
            assert dict(levels[(iid, side)]) == want_levels, (t["symbol"], side)


def test_dbn_mbp1_read_back_by_databento(day, tmp_path):
    dbn = pytest.importorskip("databento_dbn")
    ev = tickplant.read(day / "day.pcap", date=DATE)
    tickplant.export(day / "day.pcap", "dbn", tmp_path / "mbp.dbn", schema="mbp-1", date=DATE)
    dec = dbn.DBNDecoder()
    dec.write((tmp_path / "mbp.dbn").read_bytes())
    recs = dec.decode()[1:]
    book_events = ev[np.isin(ev["action"], [1, 2, 3, 4, 5, 6, 7])]
    bbo = tickplant.Books().apply_bbo(book_events)
    assert len(recs) == len(book_events)
    undef = 2**63 - 1
    for r, b in zip(recs, bbo):
        lv = r.levels[0]
        assert (lv.bid_px if lv.bid_px != undef else 0, lv.bid_sz) == (b["bid_price"], b["bid_size"])
        assert (lv.ask_px if lv.ask_px != undef else 0, lv.ask_sz) == (b["ask_price"], b["ask_size"])


def test_parquet_round_trip(day, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pl = pytest.importorskip("polars")
    ev = tickplant.read(day / "day.pcap", date=DATE)
    out = tmp_path / "catalog"
    report = tickplant.export(day / "day.pcap", "parquet", out, date=DATE)
    files = sorted((out / "data" / "order_book_delta").glob("*/*.parquet"))
    assert len(files) == len(report["files"])
    assert (out / "data" / "order_book_delta" / "AAAA.XNAS").is_dir()
    back = tickplant.read_parquet(out)
    key = lambda a: np.lexsort((a["sequence"], a["instrument_id"]))
    assert np.array_equal(np.sort(back, order=["sequence", "instrument_id"]),
                          np.sort(np.asarray(ev), order=["sequence", "instrument_id"]))
    # pyarrow and polars read the files; the timestamps are nanosecond UTC.
    t = pq.read_table(files[0])
    assert str(t.schema.field("ts_event").type) == "timestamp[ns, tz=UTC]"
    aaaa = pl.read_parquet(out / "data" / "order_book_delta" / "AAAA.XNAS" / "*.parquet")
    iid = [k for k, v in ev.symbols.items() if v == "AAAA"][0]
    mine = ev[ev["instrument_id"] == iid]
    assert aaaa.height == len(mine)
    assert aaaa["order_id"].to_list() == mine["order_id"].tolist()
    assert aaaa["price"].to_list() == mine["price"].tolist()


def nautilus_books(out, venue):
    """Books from the order book deltas of a NautilusTrader catalog, read with pyarrow as
    NautilusTrader's schema defines them (raw 128-bit prices and sizes in 1e-16 units), by
    instrument id: {symbol: (bids, asks)}, levels (price in 1e-9 units, shares, orders)."""
    pq = pytest.importorskip("pyarrow.parquet")
    books = {}
    for d in sorted((out / "data" / "order_book_delta").iterdir()):
        orders = {}
        last_ts = 0
        for f in sorted(d.glob("*.parquet")):
            t = pq.read_table(f)
            types = {x.name: str(x.type) for x in t.schema}
            assert types == {"action": "uint8", "side": "uint8", "price": "fixed_size_binary[16]",
                             "size": "fixed_size_binary[16]", "order_id": "uint64", "flags": "uint8",
                             "sequence": "uint64", "ts_event": "uint64", "ts_init": "uint64"}, f
            meta = {k.decode(): v.decode() for k, v in t.schema.metadata.items()}
            symbol, v = meta["instrument_id"].rsplit(".", 1)
            assert v == venue and meta["size_precision"] == "0"
            unit = 10 ** (16 - int(meta["price_precision"]))
            rows = t.to_pylist()
            # Named as the catalog names files: the first and last ts_init.
            assert f.stem.split("_") == [tickplant_file_ts(rows[0]["ts_init"]), tickplant_file_ts(rows[-1]["ts_init"])]
            for r in rows:
                assert r["ts_init"] >= last_ts
                last_ts = r["ts_init"]
                price = int.from_bytes(r["price"], "little", signed=True)
                size = int.from_bytes(r["size"], "little")
                assert price % unit == 0 and size % 10**16 == 0
                price, size = price // 10**7, size // 10**16
                if r["action"] == 1:
                    assert r["order_id"] not in orders
                    orders[r["order_id"]] = (r["side"], price, size)
                elif r["action"] == 2:
                    side, _, _ = orders[r["order_id"]]
                    assert size > 0
                    orders[r["order_id"]] = (side, price, size)
                elif r["action"] == 3:
                    del orders[r["order_id"]]
                elif r["action"] == 4:
                    orders.clear()
                else:
                    raise AssertionError(f"action {r['action']}")
        levels = {1: {}, 2: {}}
        for side, price, size in orders.values():
            shares, n = levels[side].get(price, (0, 0))
            levels[side][price] = (shares + size, n + 1)
        bids = [(p, *levels[1][p]) for p in sorted(levels[1], reverse=True)]
        asks = [(p, *levels[2][p]) for p in sorted(levels[2])]
        books[symbol] = (bids, asks)
    return books


def tickplant_file_ts(ns):
    t = dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H-%M-%S-") + f"{ns % 1_000_000_000:09d}Z"


def test_nautilus_catalog_builds_the_simulators_books(day, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "catalog"
    report = tickplant.export(day / "day.pcap", "nautilus", out, date=DATE)
    ev = tickplant.read(day / "day.pcap", date=DATE)
    truth = jsonl((day / "truth.jsonl").read_text())
    books = nautilus_books(out, "XNAS")
    # The truth lists the books not empty at the end.
    assert {s for s, b in books.items() if b != ([], [])} == {t["symbol"] for t in truth}
    for t in truth:
        want = tuple([(round(p * 1e9), s, n) for p, s, n in t[k]] for k in ("bids", "asks"))
        assert books[t["symbol"]] == want, t["symbol"]
    # A trade tick for each execution and trade, the aggressor opposite the resting side.
    by_symbol = {v: k for k, v in ev.symbols.items()}
    for d in sorted((out / "data" / "trade_tick").iterdir()):
        t = pq.read_table(list(d.glob("*.parquet")))
        assert t.column_names == ["price", "size", "aggressor_side", "trade_id", "ts_event", "ts_init"]
        printed = (ev["flags"] & 0x08) == 0
        mine = ev[(ev["instrument_id"] == by_symbol[d.name.split(".")[0]]) & np.isin(ev["action"], [5, 6]) & printed]
        assert t.num_rows == len(mine) > 0
        assert t.column("aggressor_side").to_pylist() == [{1: 2, 2: 1}.get(int(s), 0) for s in mine["side"]]
        assert [int.from_bytes(b, "little") // 10**16 for b in t.column("size").to_pylist()] == mine["size"].tolist()
    assert report["written_events"] + sum(report["left_out"].values()) == report["events"] == len(ev)
    # Its files are NautilusTrader's to read, and read_parquet says so.
    with pytest.raises(tickplant.TickplantError, match="ParquetDataCatalog"):
        tickplant.read_parquet(out)


@pytest.mark.parametrize("layout", ["xdp", "pillar"])
def test_nautilus_catalog_of_nyse_builds_its_books(tmp_path, layout):
    cli("sim", "nyse", "--messages", 30000, "--symbols", 20, "--layout", layout, "--out", tmp_path / "n.pcap",
        "--truth", tmp_path / "truth.jsonl")
    tickplant.export(tmp_path / "n.pcap", "nautilus", tmp_path / "cat", feed="nyse-" + layout)
    books = nautilus_books(tmp_path / "cat", "XNYS")
    truth = jsonl((tmp_path / "truth.jsonl").read_text())
    assert {s for s, b in books.items() if b != ([], [])} == {t["symbol"] for t in truth}
    for t in truth:
        assert books[t["symbol"]] == tuple([(round(p * 1e9), s, n) for p, s, n in t[k]] for k in ("bids", "asks"))


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent (an outside checkout)")
def test_real_samples_against_the_cli():
    ritch = SHARED / "itch" / "ritch" / "ex20101224.TEST_ITCH_50"
    ev = tickplant.read(ritch, infer_length=True, date="2019-12-30")
    # Its zero length prefixes are told by its first message: the same without the flag.
    told = tickplant.read(ritch, date="2019-12-30")
    assert np.array_equal(told, ev) and told.symbols == ev.symbols
    lines = jsonl(cli("itch", "decode", "--infer-length", ritch))
    assert len(ev) == len(lines) == 12012
    by_type = collections.Counter(chr(t) for t in ev["msg_type"])
    assert by_type == {"P": 5000, "A": 4997, "D": 1745, "E": 198, "X": 45, "U": 12, "S": 6, "R": 3, "H": 3, "F": 3}
    adds = ev[ev["msg_type"] == ord("A")]
    cli_adds = [l for l in lines if l["type"] == "A"]
    assert [int(x) for x in adds["order_id"]] == [l["order_reference_number"] for l in cli_adds]
    assert [int(x) for x in adds["size"]] == [l["shares"] for l in cli_adds]
    # NYSE XDP and OPRA binary captures: the decode command's fields, as the events hold them.
    nyse = SHARED / "nyse" / "xdp-integrated-v2.1"
    m = tickplant.read(nyse / "SymbolIndexMappingMessage.pcap", feed="nyse-xdp")
    line = jsonl(cli("decode", "--feed", "nyse-xdp", nyse / "SymbolIndexMappingMessage.pcap"))[0]
    f, pk = line["fields"], line["packet"]
    assert len(m) == 1 and m[0]["msg_type"] == int(line["type"]) == 3
    assert m[0]["instrument_id"] == f["symbol_index"] and m.symbols[f["symbol_index"]] == f["symbol"]
    assert m[0]["sequence"] == line["sequence"]
    assert m[0]["ts_event"] == pk["timestamp"] * 10**9 + pk["nanoseconds"]
    # An add of a symbol whose mapping is not in the capture cannot be priced: no event, and
    # a warning that nothing decoded.
    with pytest.warns(UserWarning, match="none of their 1 messages decoded"):
        assert len(tickplant.read(nyse / "AddOrderMessage.pcap", feed="nyse-xdp")) == 0
    opra = SHARED / "opra" / "v6.2"
    q = tickplant.read(opra / "LongEquityAndIndexQuoteMessage.pcap", feed="opra-binary")
    line = jsonl(cli("decode", "--feed", "opra-binary", opra / "LongEquityAndIndexQuoteMessage.pcap"))[0]
    assert [int(x) for x in q["action"]] == [10, 10]
    assert int(q[0]["size"]) == line["fields"]["bid_size"] and int(q[1]["size"]) == line["fields"]["offer_size"]
    assert all(int(s) == line["sequence"] for s in q["sequence"])


def test_the_trading_day_is_told_from_the_capture(day, tmp_path):
    """Without a date, ITCH times count from the midnight the capture's receive times
    imply; a BinaryFILE has none, and says so; a capture received hours after its messages'
    times is put on the day received, and says so."""
    import warnings as w
    given = tickplant.read(day / "day.pcap", date=DATE)
    with w.catch_warnings():
        w.simplefilter("error")
        told = tickplant.read(day / "day.pcap")
        report = tickplant.export(day / "day.pcap", "jsonl", tmp_path / "x.jsonl")
    assert np.array_equal(told, given)
    assert report["date"] == DATE
    # Every message is stamped before the packet carrying it is received, on the day.
    assert (told["ts_event"] <= told["ts_recv"]).all()
    assert midnight_ns(DATE) <= told["ts_event"].min() and told["ts_recv"].max() < midnight_ns(DATE) + 86_400 * 10**9
    with pytest.warns(UserWarning, match="no receive times to tell the trading day from"):
        b = tickplant.read(day / "day.itch.gz")
    assert b["ts_event"].max() < 86_400 * 10**9
    assert np.array_equal(tickplant.read(day / "day.itch.gz", date=DATE)["ts_event"], given["ts_event"])
    # The same packets received 30 hours later (a replay the next day): that day, warned.
    raw = bytearray((day / "day.pcap").read_bytes())
    pos = 24
    while pos < len(raw):
        sec, frac, incl, orig = struct.unpack_from("<IIII", raw, pos)
        struct.pack_into("<I", raw, pos, sec + 30 * 3600)
        pos += 16 + incl
    (tmp_path / "later.pcap").write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match=r"received 6\.0 hours after their messages' times.*2026-11-21"):
        later = tickplant.read(tmp_path / "later.pcap")
    assert np.array_equal(later["ts_event"], given["ts_event"] + 86_400 * 10**9)
    # Received half an hour before they were sent (a clock that is behind): the day is
    # still found, and the clock's disagreement said.
    raw = bytearray((day / "day.pcap").read_bytes())
    pos = 24
    while pos < len(raw):
        sec, frac, incl, orig = struct.unpack_from("<IIII", raw, pos)
        struct.pack_into("<I", raw, pos, sec - 1800)
        pos += 16 + incl
    (tmp_path / "early.pcap").write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match=r"received 30\.0 minutes before their messages' times.*2026-11-20"):
        early = tickplant.read(tmp_path / "early.pcap")
    assert np.array_equal(early["ts_event"], given["ts_event"])
    with pytest.raises(ValueError, match="YYYY-MM-DD or auto"):
        tickplant.read(day / "day.pcap", date="20261120")


def _to_group(src, dst, last_octet):
    """A classic pcap of Ethernet/IPv4/UDP frames sent to another group (its last octet),
    IPv4 checksum made anew, UDP checksum off."""
    raw = bytearray(src.read_bytes())
    pos = 24
    while pos < len(raw):
        incl = struct.unpack_from("<I", raw, pos + 8)[0]
        ip = pos + 16 + 14
        raw[ip + 19] = last_octet
        raw[ip + 10:ip + 12] = b"\0\0"
        total = sum(struct.unpack_from(">10H", raw, ip))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        struct.pack_into(">H", raw, ip + 10, ~total & 0xFFFF)
        udp = ip + (raw[ip] & 15) * 4
        raw[udp + 6:udp + 8] = b"\0\0"
        pos += 16 + incl
    dst.write_bytes(bytes(raw))


def _merged(dst, *srcs):
    """Classic pcaps' records in one file, in capture-time order (a stable sort)."""
    recs = []
    for f in srcs:
        raw, pos = f.read_bytes(), 24
        while pos < len(raw):
            sec, frac, incl, _ = struct.unpack_from("<IIII", raw, pos)
            recs.append(((sec, frac), raw[pos:pos + 16 + incl]))
            pos += 16 + incl
    recs.sort(key=lambda r: r[0])
    dst.write_bytes(srcs[0].read_bytes()[:24] + b"".join(r for _, r in recs))
    return dst


def test_a_capture_of_both_lines(day, tmp_path):
    """One capture holding a feed's A and B lines (two groups), as a tap records them: read
    as it is, it is an error naming both; one line named, that line; both named, arbitrated:
    every message either line carried, a gap record exactly where both lost a packet."""
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    cli("sim", "impair", "--in", day / "day.pcap", "--out-a", a, "--out-b", b, "--loss-a", 0.03,
        "--loss-b", 0.03, "--reorder", 0.01, "--skew-us", "0..40", "--seed", 3, "--truth", tmp_path / "truth.csv")
    _to_group(b, tmp_path / "b2.pcap", 112)
    both = _merged(tmp_path / "ab.pcap", a, tmp_path / "b2.pcap")
    lines = ["233.54.12.111:26400", "233.54.12.112:26400"]

    with pytest.raises(tickplant.TickplantError, match=r"two destinations.*--lines 233\.54\.12\.11[12]:26400,233\.54\.12\.11[12]:26400"):
        tickplant.read(both, date=DATE)
    ev = tickplant.read(both, date=DATE, lines=lines)
    full = tickplant.read(day / "day.pcap", date=DATE)
    import csv
    with open(tmp_path / "truth.csv") as f:
        lost = [r for r in csv.DictReader(f) if r["a_copies"] == "0" and r["b_copies"] == "0"]
    gaps = ev[ev["action"] == 11]
    assert int(gaps["size"].sum()) == sum(int(r["count"]) for r in lost) > 0
    missing = set()
    for g in gaps:
        missing.update(range(int(g["sequence"]), int(g["order_id"]) + 1))
    kept = full[[int(q) not in missing for q in full["sequence"]]]
    data = ev[ev["action"] != 11]
    assert len(data) == len(kept)
    # What the messages carry is the day's; what the books fill in (the price and side of
    # an order whose add was lost, the stale flags) is not, after a gap.
    for name in ("sequence", "ts_event", "order_id", "instrument_id", "action", "msg_type"):
        assert np.array_equal(data[name], kept[name]), name
    # Both lines sent to one group (as `sim impair` writes them), read as one: the copies
    # a line brings late fill what the other lost, as arbitrated.
    merged = tickplant.read(_merged(tmp_path / "one-group.pcap", a, b), date=DATE)
    for name in ("sequence", "ts_event", "order_id", "instrument_id", "action", "msg_type", "size"):
        assert np.array_equal(merged[name], ev[name]), name
    # One line alone: that line's losses are its gaps.
    only_b = tickplant.read(both, date=DATE, lines="233.54.12.112:26400")
    assert (only_b["action"] == 11).sum() > len(gaps)
    report = tickplant.export(both, "jsonl", tmp_path / "ab.jsonl", date=DATE, lines=lines)
    assert report["events"] == len(ev) and report["read"]["other_frames"] == 0
    with pytest.raises(ValueError, match="lines"):
        tickplant.read(both, lines=["nowhere"])


def test_a_compressed_capture_reads_as_the_capture(day, tmp_path):
    import gzip
    (tmp_path / "day.pcap.gz").write_bytes(gzip.compress((day / "day.pcap").read_bytes()))
    plain = tickplant.read(day / "day.pcap", date=DATE)
    assert np.array_equal(tickplant.read(tmp_path / "day.pcap.gz", date=DATE), plain)


def test_a_rotated_capture_reads_as_the_whole(day, tmp_path):
    """The files of a rotated capture (`arb --rotate`), as a list: the events of the one
    capture they were cut from, books going on from file to file; export takes the list
    too."""
    cli("arb", "--a", day / "day.pcap", "--hr-out", tmp_path / "hr.pcap", "--rotate", "400KB")
    parts = sorted(tmp_path.glob("hr-*.pcap"))
    assert len(parts) >= 3
    whole = tickplant.read(day / "day.pcap", date=DATE)
    rotated = tickplant.read(parts, date=DATE)
    assert np.array_equal(rotated, whole)
    assert rotated.symbols == whole.symbols
    chunks = list(tickplant.read([str(p) for p in parts], date=DATE, chunk=7000))
    assert np.array_equal(np.concatenate(chunks), whole)
    report = tickplant.export(parts, "jsonl", tmp_path / "all.jsonl", date=DATE)
    assert report["events"] == len(whole)
    with pytest.raises(ValueError, match="empty list"):
        tickplant.read([])


def test_tap_trailers_give_ts_recv(day, tmp_path):
    """Frames with an Arista 7130 (MetaWatch) trailer: timestamps="metawatch" takes ts_recv
    from it; frames without one keep the capture's time, with a warning."""
    raw = (day / "day.pcap").read_bytes()
    nanos = struct.unpack_from("<I", raw, 0)[0] == 0xA1B23C4D
    out, pos, n = bytearray(raw[:24]), 24, 0
    while pos < len(raw):
        sec, frac, incl, orig = struct.unpack_from("<IIII", raw, pos)
        data = bytes(raw[pos + 16:pos + 16 + incl])
        pos += 16 + incl
        n += 1
        if n > 1:
            t = sec * 10**9 + (frac if nanos else frac * 1000) + 250_000  # the tap 250 us later
            data += b"\xde\xad\xbe\xef" + struct.pack(">II", t // 10**9, t % 10**9) + b"\x01\x00\x07\x03"
        out += struct.pack("<IIII", sec, frac, len(data), len(data)) + data
    (tmp_path / "tap.pcap").write_bytes(bytes(out))
    plain = tickplant.read(day / "day.pcap", date=DATE)
    with pytest.warns(UserWarning, match=f"1 of its {n} frames had no MetaWatch trailer time"):
        tap = tickplant.read(tmp_path / "tap.pcap", date=DATE, timestamps="metawatch")
    first = plain["ts_recv"] == plain["ts_recv"][0]
    assert np.array_equal(tap["ts_recv"][first], plain["ts_recv"][first])
    assert np.array_equal(tap["ts_recv"][~first], plain["ts_recv"][~first] + 250_000)
    assert np.array_equal(tickplant.read(tmp_path / "tap.pcap", date=DATE)["ts_recv"], plain["ts_recv"])
    with pytest.raises(ValueError, match="metawatch"):
        tickplant.read(tmp_path / "tap.pcap", timestamps="ptp")


def test_a_capture_cut_short_warns(day, tmp_path):
    """A capture whose snapshot length cut frames short: the read warns, by count, and what
    those frames carried is gap records."""
    raw = (day / "day.pcap").read_bytes()
    out, pos, n, cut = bytearray(raw[:24]), 24, 0, 0
    while pos < len(raw):
        sec, frac, incl, orig = struct.unpack_from("<IIII", raw, pos)
        data = raw[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        n += 1
        if n % 4 == 0 and incl > 80:
            data, cut = data[:80], cut + 1
        out += struct.pack("<IIII", sec, frac, len(data), orig) + data
    (tmp_path / "snap.pcap").write_bytes(bytes(out))
    assert cut > 100
    with pytest.warns(UserWarning, match=f"{cut} frames were cut short by the capture"):
        ev = tickplant.read(tmp_path / "snap.pcap", date=DATE)
    assert (ev["action"] == 11).sum() > 0
    with pytest.warns(UserWarning, match="cut short by the capture"):
        report = tickplant.export(tmp_path / "snap.pcap", "jsonl", tmp_path / "x.jsonl", date=DATE)
    assert report["read"]["cut_short_frames"] == cut


def test_errors_carry_the_library_message(tmp_path):
    with pytest.raises(tickplant.TickplantError, match="cannot open"):
        tickplant.read(tmp_path / "missing.pcap")
    (tmp_path / "x.itch").write_bytes(b"\x00\x05")
    with pytest.raises(tickplant.TickplantError, match="ends inside message 1"):
        tickplant.read(tmp_path / "x.itch")
    with pytest.raises(ValueError, match="feed="):
        tickplant.read(tmp_path / "x.itch", feed="cme")
    with pytest.raises(tickplant.TickplantError, match="read from captures"):
        tickplant.read(tmp_path / "x.itch", feed="nyse-xdp")
    # Bad arguments are ValueError, files and their contents TickplantError (docs/python.md).
    with pytest.raises(ValueError, match="schema"):
        tickplant.export(tmp_path / "x.itch", "dbn", tmp_path / "o.dbn", schema="ohlcv")
    with pytest.raises(ValueError, match="format"):
        tickplant.export(tmp_path / "x.itch", "xls", tmp_path / "o.xls")
    with pytest.raises(ValueError, match="date"):
        tickplant.read(tmp_path / "x.itch", date="2026-13-45")


def test_a_capture_of_another_feed_is_an_error_not_an_empty_array(day, tmp_path):
    """The feed left at its default for a NYSE capture, or a line the capture does not hold:
    an error that says what the capture holds."""
    subprocess.run([BIN, "sim", "nyse", "--messages", "2000", "--symbols", "5", "--out",
                    str(tmp_path / "nyse.pcap")], check=True, capture_output=True)
    with pytest.raises(tickplant.TickplantError, match=r"do not read as MoldUDP64\. A capture of another feed"):
        tickplant.read(tmp_path / "nyse.pcap")
    assert len(tickplant.read(tmp_path / "nyse.pcap", feed="nyse-xdp")) > 1000
    with pytest.raises(tickplant.TickplantError, match=r"to 239\.1\.1\.1:5000 \(the lines asked for\).*26400"):
        tickplant.read(day / "day.pcap", date=DATE, lines="239.1.1.1:5000")


def test_gaps_are_records(day, tmp_path):
    """A capture missing one packet: a gap record with its range where it was seen."""
    full = tickplant.read(day / "day.pcap", date=DATE)
    cut = tmp_path / "cut.pcap"
    data = (day / "day.pcap").read_bytes()
    # Classic pcap: a 24-byte file header, then records of a 16-byte header and the frame.
    off, frames = 24, []
    while off < len(data):
        n = int.from_bytes(data[off + 8:off + 12], "little")
        frames.append((off, 16 + n))
        off += 16 + n
    o, n = frames[100]
    cut.write_bytes(data[:o] + data[o + n:])
    ev = tickplant.read(cut, date=DATE)
    gaps = ev[ev["action"] == 11]
    assert len(gaps) == 1
    first, last, count = int(gaps[0]["sequence"]), int(gaps[0]["order_id"]), int(gaps[0]["size"])
    assert count == last - first + 1 and count > 0
    kept = full[(full["sequence"] < first) | (full["sequence"] > last)]
    assert len(ev) == len(kept) + 1


@pytest.mark.parametrize("feed,sim", [("opra-binary", "opra"), ("opra-fast", "opra-fast")])
def test_opra_reads_equal_the_simulators_events(tmp_path, feed, sim):
    cli("sim", sim, "--messages", 3000, "--out", tmp_path / "o.pcap", "--truth", tmp_path / "truth.jsonl")
    ev = tickplant.read(tmp_path / "o.pcap", feed=feed)
    truth = jsonl((tmp_path / "truth.jsonl").read_text())
    assert len(ev) == len(truth) > 3000
    sides = {"none": 0, "bid": 1, "ask": 2}
    for e, t in zip(ev, truth):
        assert e["sequence"] == t["sequence"]
        assert tickplant.ACTIONS[int(e["action"])] == t["action"]
        assert e["side"] == sides[t["side"]]
        assert e["price"] == round(t["price"] * 1e9) and e["size"] == t["size"]
        assert ev.symbols.get(int(e["instrument_id"]), "") == t["symbol"]
    # Each series its own name, beside its root: the OCC symbol (FAST: root, YYMM, C or P,
    # strike), and the instrument column of the frames.
    assert set(ev.instruments) == set(ev.symbols) and len(set(ev.instruments.values())) == len(ev.instruments)
    for i, name in ev.instruments.items():
        root = ev.symbols[i]
        if feed == "opra-binary":
            assert len(name) == 21 and name[:6].rstrip() == root and name[12] in "CP", name
        else:
            assert name.split(" ")[0] == root and name.split(" ")[2] in ("C", "P"), name
    df = ev.to_pandas()
    assert list(df.columns[4:7]) == ["symbol", "instrument", "action"]
    assert (df["instrument"] == [ev.instruments.get(int(i), "") for i in ev["instrument_id"]]).all()


@pytest.mark.parametrize("layout", ["xdp", "pillar"])
def test_nyse_books_equal_the_simulators_truth(tmp_path, layout):
    cli("sim", "nyse", "--messages", 30000, "--symbols", 20, "--layout", layout, "--out", tmp_path / "n.pcap",
        "--truth", tmp_path / "truth.jsonl")
    ev = tickplant.read(tmp_path / "n.pcap", feed="nyse-" + layout)
    books = tickplant.Books()
    books.apply(ev)
    by_symbol = {v: k for k, v in ev.symbols.items()}
    for t in jsonl((tmp_path / "truth.jsonl").read_text()):
        iid = by_symbol[t["symbol"]]
        for side, key in (("bid", "bids"), ("ask", "asks")):
            assert books.depth(iid, side, 1000) == [(round(p * 1e9), s, n) for p, s, n in t[key]], t["symbol"]


def test_progress_and_interrupt(day, tmp_path, capfd):
    ev = tickplant.read(day / "day.pcap", date=DATE, progress=True)
    err = capfd.readouterr().err
    assert "tickplant.read: 100%" in err and len(ev) == 60000
    # A signal whose handler raises, arriving during a long read, ends it with that error.
    import signal

    big = tmp_path / "big.itch"
    cli("sim", "itch", "--messages", 1_000_000, "--symbols", 50, "--out", big)

    def stop(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.002)
        with pytest.raises(KeyboardInterrupt):
            tickplant.read(big, date=DATE)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert len(tickplant.read(big, date=DATE)) == 1_000_000
