"""Arbitrator against the impairer's truth, Matcher against brute force, FastDecoder
against `tickplant fast decode`, run() against the report's own accounting."""

import csv
import json
import os
import pathlib
import random
import subprocess

import numpy as np
import pytest

import tickplant

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data"
BIN = os.environ.get("TICKPLANT_BIN", str(ROOT / "target" / "debug" / "tickplant"))


def cli(*args):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"tickplant {' '.join(map(str, args))}: {r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def ab(tmp_path_factory):
    d = tmp_path_factory.mktemp("ab")
    cli("sim", "itch", "--messages", 30000, "--symbols", 20, "--out", d / "feed.pcap")
    cli("sim", "impair", "--in", d / "feed.pcap", "--seed", 7, "--loss-a", 0.2, "--loss-b", 0.2, "--reorder", 0.05,
        "--dup", 0.02, "--out-a", d / "a.pcap", "--out-b", d / "b.pcap", "--truth", d / "truth.csv")
    return d


def test_arbitrator_gaps_are_the_packets_both_lines_lost(ab):
    truth = list(csv.DictReader(open(ab / "truth.csv")))
    lost = set()
    for t in truth:
        if int(t["a_copies"]) == 0 and int(t["b_copies"]) == 0:
            lost.update(range(int(t["seq"]), int(t["seq"]) + int(t["count"])))
    assert lost, "the impairment lost some packets on both lines"
    r = tickplant.Arbitrator(ab / "a.pcap", ab / "b.pcap", mode="time", timeout_us=100_000).run()
    hr_gaps = [g for g in r.gaps if g[0] == "hr"]
    in_gaps = set()
    for out, first, last, n, reason, at in hr_gaps:
        assert n == last - first + 1
        in_gaps.update(range(first, last + 1))
    assert in_gaps == lost
    # The HR output holds every other packet once, in order.
    released = set()
    for p in r.hr:
        released.update(range(int(p["seq"]), int(p["seq"]) + int(p["count"])))
    everything = set()
    for t in truth:
        everything.update(range(int(t["seq"]), int(t["seq"]) + int(t["count"])))
    assert released == everything - lost
    assert (np.diff(r.hr["seq"].astype(np.int64)) > 0).all()
    assert (r.hr["release_ns"] >= r.hr["arrival_ns"]).all()
    g = r.gaps_frame()
    assert list(g.columns) == ["output", "first_seq", "last_seq", "messages", "reason", "at_ns"]
    s = r.stats_frame()
    assert s.loc["hr", "gaps"] == len(hr_gaps)
    assert s.loc["A", "packets"] + s.loc["B", "packets"] > len(r.hr)


def test_arbitrator_options_are_checked():
    # Bad arguments are ValueError (docs/python.md), named in the message.
    with pytest.raises(ValueError, match="timeout"):
        tickplant.Arbitrator("a.pcap", "b.pcap", timeuot_us=5)
    with pytest.raises(ValueError, match="sometimes"):
        tickplant.Arbitrator("a.pcap", "b.pcap", mode="sometimes")


def test_matcher_equals_brute_force_with_inserts_and_removals():
    rng = random.Random(5)
    m = tickplant.Matcher()
    symbols = ["AAAA", "AAAB", "AAAC", "AAAD"]
    ids = []
    for i in range(1, 600):
        preds = []
        if rng.random() < 0.7:
            preds.append(f'symbol = "{rng.choice(symbols)}"')
        lo = rng.randint(0, 90)
        preds.append(f"price >= {lo}")
        if rng.random() < 0.5:
            preds.append(f"price < {lo + rng.randint(1, 30)}.5")
        if rng.random() < 0.4:
            preds.append(f"size > {rng.randint(0, 900)}")
        if rng.random() < 0.2:
            preds.append("bid < ask")
        ids.append(m.add(f"{i}: " + " and ".join(preds)))
    assert len(m) == 599 and m.memory_bytes() > 0
    matched = 0
    for k in range(400):
        if k == 200:
            for sid in rng.sample(ids, 250):
                assert m.remove(sid)
            assert len(m) == 349
        e = {"symbol": rng.choice(symbols), "price": round(rng.uniform(0, 120), 2), "size": rng.randint(0, 1000),
             "bid": rng.randint(0, 100), "ask": rng.randint(0, 100)}
        got = m.match(e)
        assert got == m.brute_force(e) == sorted(got)
        matched += len(got)
    assert matched > 100
    with pytest.raises(tickplant.TickplantError):
        m.add("1: symbol = ")


def test_matcher_takes_floats_as_python_prints_them():
    # str(0.00001) is '1e-05' and str(1e16) '1e+16': exact all the same.
    m = tickplant.Matcher()
    m.add("1: x = 0.00001")
    m.add("2: x > 1000000000000000")
    m.add("3: x = 150")
    assert m.match({"x": 0.00001}) == [1]
    assert m.match({"x": 1e16}) == [2]
    assert m.match({"x": 1.5e2}) == [3] and m.match({"x": 150}) == [3]
    # None and NaN (pandas' missing value) leave the attribute out.
    assert m.match({"x": None}) == [] and m.match({"x": float("nan")}) == []
    m.add('4: y = "a"')
    assert m.match({"x": float("nan"), "y": "a"}) == [4]
    # A float that needs more than 9 decimal places is refused, not rounded.
    with pytest.raises(tickplant.TickplantError, match="more than 9 decimal places"):
        m.match({"x": 1e-10})


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent (an outside checkout)")
def test_fast_decoder_equals_the_cli():
    mf = SHARED / "fast" / "mfast"
    d = tickplant.FastDecoder(mf / "example.xml")
    data = (mf / "complex30000.dat").read_bytes()
    got = d.decode(data, framing="u32le")
    want = [json.loads(l) for l in cli("fast", "decode", "--templates", mf / "example.xml", mf / "complex30000.dat").splitlines()]
    assert len(got) == len(want) == 30001
    assert got == want
    opra = SHARED / "fast" / "openfast" / "OPRA"
    o = tickplant.FastDecoder((opra / "OPRATemplate.xml").read_text())
    msgs = o.decode((opra / "messages.fast").read_bytes(), framing="opra")
    assert len(msgs) == 63
    with pytest.raises(tickplant.TickplantError, match="framing"):
        o.decode(b"", framing="zip")


def test_run_gives_the_report(ab, tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text(f"""
[source]
a = "{ab / 'a.pcap'}"
b = "{ab / 'b.pcap'}"
decoder = "itch50"

[arbitration]
mode = "time"
timeout-us = 100000

[[consumer]]
name = "all"
action = "count"
policy = "backpressure"
""")
    report = tickplant.run(cfg)
    cli_report = tmp_path / "cli.json"
    cfg2 = tmp_path / "run2.toml"
    cfg2.write_text(cfg.read_text() + f'\n[run]\nreport = "{cli_report}"\n')
    subprocess.run([BIN, "run", "--quiet", cfg2], check=True, capture_output=True)
    want = json.loads(cli_report.read_text())
    # What the input decides (not the times a run took).
    keys = ("frames", "gaps", "packets_in", "messages_in", "decoded", "undecodable", "by_type", "book",
            "instruments", "live_orders", "stale_books")
    for r in (report, tickplant.run(cfg.read_text())):
        for k in keys:
            assert r[k] == want[k], k
        for c, w in zip(r["consumers"], want["consumers"]):
            for k in ("name", "delivered", "dropped", "by_action"):
                assert c[k] == w[k], k
    assert report["decoded"] > 20000 and report["consumers"][0]["delivered"] > 20000
    with pytest.raises(tickplant.TickplantError, match="decoder"):
        tickplant.run('[source]\na = "x.pcap"\ndecoder = "cme"\n')


def test_plot_report_draws_every_picture(ab, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    report = tickplant.run(f"""
[source]
a = "{ab / 'a.pcap'}"
b = "{ab / 'b.pcap'}"
decoder = "itch50"
[[consumer]]
name = "all"
action = "count"
policy = "backpressure"
""")
    assert sum(report["timeline"]["messages"]) == report["messages_in"]
    figs = tickplant.plot_report(report, out_dir=tmp_path / "png")
    assert set(figs) == {"rate", "wins", "gaps", "latency", "consumers"}
    for name in figs:
        png = tmp_path / "png" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
