"""tickplant for researchers: market-data captures to numpy, pandas and polars, DBN and Parquet.

Everything that decodes, builds books or writes files is tickplant's Rust library (the
code the ``tickplant`` command runs); this module gives it numpy dtypes and data frames.

    >>> import tickplant
    >>> ev = tickplant.read("day.pcap", feed="itch50", date="2026-11-20")
    >>> df = ev.to_pandas()

See docs/python.md for every function.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Dict, Iterator, Optional, Sequence, Union

import numpy as np

from . import _native
from ._native import TickplantError

__all__ = [
    "ACTIONS",
    "EVENT_DTYPE",
    "BBO_DTYPE",
    "SIDES",
    "Arbitrator",
    "ArbResult",
    "Books",
    "EventArray",
    "FastDecoder",
    "Matcher",
    "PACKET_DTYPE",
    "TickplantError",
    "bbo_series",
    "export",
    "read",
    "plot_report",
    "read_dbn",
    "read_parquet",
    "run",
]

#: One normalized event: the Rust ``Event``, field for field (64 bytes, little-endian).
EVENT_DTYPE = np.dtype(
    {
        "names": [
            "ts_recv", "ts_event", "sequence", "order_id", "price", "aux", "size",
            "instrument_id", "action", "side", "flags", "msg_type", "venue",
        ],
        "formats": ["<u8", "<u8", "<u8", "<u8", "<i8", "<u8", "<u4", "<u4", "u1", "u1", "u1", "u1", "<u4"],
        "offsets": [0, 8, 16, 24, 32, 40, 48, 52, 56, 57, 58, 59, 60],
        "itemsize": 64,
    }
)

#: Action codes of ``EVENT_DTYPE['action']``.
ACTIONS = {
    1: "add", 2: "cancel", 3: "delete", 4: "modify", 5: "execute", 6: "trade",
    7: "clear", 8: "status", 9: "imbalance", 10: "quote", 11: "gap", 12: "trusted",
}
#: Side codes of ``EVENT_DTYPE['side']``.
SIDES = {0: "none", 1: "bid", 2: "ask"}

#: One best bid and offer after an event (:func:`bbo_series`); prices in 1e-9 units.
BBO_DTYPE = np.dtype(
    [("ts_event", "<u8"), ("instrument_id", "<u8"), ("bid_price", "<i8"), ("bid_size", "<u8"),
     ("ask_price", "<i8"), ("ask_size", "<u8")]
)

#: A packet the arbitrator released (:class:`Arbitrator`): its first sequence number, when
#: it arrived and when it was released (ns), its message count and the input (0 A, 1 B).
PACKET_DTYPE = np.dtype(
    [("seq", "<u8"), ("arrival_ns", "<u8"), ("release_ns", "<u8"), ("count", "<u4"), ("input", "<u4")]
)

_ACTION_CODES = {v: k for k, v in ACTIONS.items()}
_FEEDS = ("itch50", "nyse-xdp", "nyse-pillar", "opra-binary", "opra-fast")


class EventArray(np.ndarray):
    """A numpy structured array of ``EVENT_DTYPE`` that knows its instruments' symbols:
    ``symbols`` as the feed names them (OPRA: the series' root), ``instruments`` each
    instrument's own (OPRA: the series' OCC symbol; the symbol for other feeds)."""

    symbols: Dict[int, str]
    instruments: Dict[int, str]

    def __array_finalize__(self, obj):
        self.symbols = getattr(obj, "symbols", {})
        self.instruments = getattr(obj, "instruments", {})

    def to_pandas(self, prices: str = "float"):
        """A pandas DataFrame: ``ts_recv``/``ts_event`` as datetime64[ns, UTC], ``action``
        and ``side`` as names, ``symbol`` from the feed's directory (and ``instrument``, each
        series' OCC symbol, for OPRA), ``price`` as float (``prices="float"``) or the exact
        integer in 1e-9 units (``prices="int"``)."""
        import pandas as pd

        cols = _columns(self, prices)
        df = pd.DataFrame(cols)
        for t in ("ts_recv", "ts_event"):
            df[t] = pd.to_datetime(df[t], unit="ns", utc=True)
        return df

    def to_polars(self, prices: str = "float"):
        """A polars DataFrame with the columns of :meth:`to_pandas`."""
        import polars as pl

        cols = _columns(self, prices)
        df = pl.DataFrame(cols)
        return df.with_columns(
            [pl.col(t).cast(pl.Datetime("ns", "UTC")) for t in ("ts_recv", "ts_event")]
        )


def _columns(ev: np.ndarray, prices: str) -> dict:
    if prices not in ("float", "int"):
        raise ValueError(f"prices={prices!r}: 'float' or 'int'")
    a = np.asarray(ev).view(EVENT_DTYPE)
    codes = np.array([""] + [ACTIONS[i] for i in range(1, len(ACTIONS) + 1)], dtype=object)
    sides = np.array(["none", "bid", "ask"], dtype=object)
    ids = a["instrument_id"]
    uniq, inv = np.unique(ids, return_inverse=True)

    def named(names):
        if not names:
            return np.full(len(a), "", dtype=object)
        return np.array([names.get(int(i), "") for i in uniq], dtype=object)[inv]

    syms = getattr(ev, "symbols", {})
    instruments = getattr(ev, "instruments", {})
    symbol = named(syms)
    price = a["price"] / 1e9 if prices == "float" else a["price"].copy()
    cols = {
        "ts_recv": a["ts_recv"].astype("int64"),
        "ts_event": a["ts_event"].astype("int64"),
        "sequence": a["sequence"],
        "instrument_id": ids,
        "symbol": symbol,
    }
    if instruments and instruments != syms:
        # OPRA: a root names many series; each series' own symbol beside it.
        cols["instrument"] = named(instruments)
    cols.update({
        "action": codes[np.where(a["action"] < len(codes), a["action"], 0)],
        "side": sides[np.minimum(a["side"], 2)],
        "price": price,
        "size": a["size"],
        "order_id": a["order_id"],
        "aux": a["aux"],
        "flags": a["flags"],
        "msg_type": a["msg_type"],
        "venue": a["venue"],
    })
    return cols


def _names(x):
    """A list of names from a sequence of them, or from one name alone: a bare string is one
    name, not the letters of one (``symbols="AAPL"`` is AAPL, not A, A, P and L)."""
    if x is None:
        return None
    return [x] if isinstance(x, (str, int)) else list(x)


def _split_types(types: Optional[Sequence[Union[str, int]]]):
    """Action names, and the feed's message types (ITCH letters, NYSE numbers, OPRA
    categories) as the byte ``msg_type`` holds them."""
    types = _names(types)
    if not types:
        return None, None
    actions, codes = [], []
    for t in types:
        if isinstance(t, int):
            codes.append(t)
        elif t in _ACTION_CODES:
            actions.append(t)
        elif t.isdigit():
            codes.append(int(t))
        elif len(t) == 1:
            codes.append(ord(t))
        else:
            raise ValueError(
                f"type {t!r}: an action ({', '.join(_ACTION_CODES)}) or a message type "
                "(a letter, or a number for NYSE)"
            )
    for c in codes:
        if not 0 <= c < 256:
            raise ValueError(f"message type {c} does not fit the event's msg_type byte")
    return actions or None, codes or None


def _paths(path):
    """A path, or a list of captures read one after another as one stream (the files of a
    rotated capture): (the first, the rest)."""
    if isinstance(path, (list, tuple)):
        if not path:
            raise ValueError("path: an empty list of captures")
        return str(path[0]), [str(p) for p in path[1:]]
    return str(path), []


def _open(path, feed, symbols, types, date, infer_length, templates, header_bytes, max_orders, lines,
          timestamps="capture"):
    if feed not in _FEEDS:
        raise ValueError(f"feed={feed!r}: one of {', '.join(_FEEDS)}")
    actions, codes = _split_types(types)
    first, then = _paths(path)
    return _native.open_reader(
        first, feed=feed, date=date, infer_length=infer_length,
        symbols=_names(symbols) or None, actions=actions, types=codes,
        templates=None if templates is None else str(templates), header_bytes=header_bytes,
        max_orders=max_orders, lines=_names(lines), then=then, timestamps=timestamps,
    )


def _wrap(buf, symbols: Dict[int, str], instruments: Optional[Dict[int, str]] = None) -> EventArray:
    """The library's events viewed as EVENT_DTYPE records, with no copy (the array keeps
    the Rust buffer alive)."""
    a = np.asarray(buf).view(EVENT_DTYPE).view(EventArray)
    a.symbols = symbols
    a.instruments = symbols if instruments is None else instruments
    return a


def _warn_unnamed(unnamed) -> None:
    """Symbols asked for that the whole file never named: most likely typos."""
    if unnamed:
        warnings.warn(
            f"symbols {', '.join(unnamed)}: the feed never named them (no events of them)", stacklevel=3
        )


def _warn_read(reader) -> None:
    """What a whole read should be told of: symbols it never named, frames the capture cut
    short (what they carried is missing: gap records)."""
    _warn_unnamed(reader.unnamed())
    for w in reader.warnings():
        warnings.warn(w, stacklevel=3)


def _chunks(reader, chunk: int, progress: bool) -> Iterator[EventArray]:
    last = -1
    while True:
        buf = reader.read(chunk)
        if buf is None:
            if progress and last != 100:
                print("tickplant.read: 100%", file=sys.stderr)
            _warn_read(reader)
            break
        if progress:
            done, total = reader.progress()
            pct = int(100 * done / total) if total else 100
            if pct != last:
                print(f"tickplant.read: {pct}%", file=sys.stderr)
                last = pct
        yield _wrap(buf, reader.symbols(), reader.instruments())


def read(
    path,
    feed: str = "itch50",
    symbols: Optional[Sequence[str]] = None,
    types: Optional[Sequence[Union[str, int]]] = None,
    chunk: Optional[int] = None,
    *,
    date: str = "auto",
    infer_length: bool = False,
    templates=None,
    header_bytes: int = 5,
    max_orders: Optional[int] = None,
    progress: bool = False,
    lines: Optional[Sequence[str]] = None,
    timestamps: str = "capture",
) -> Union[EventArray, Iterator[EventArray]]:
    """Normalized events of a file, as a numpy structured array of ``EVENT_DTYPE``.

    ``path``: a capture (pcap/pcapng) of ``feed``, or for ``itch50`` also a BinaryFILE
    (plain or ``.gz``); or a list of captures read one after another as one stream (the
    files of a rotated capture, ``sorted(glob("hr-*.pcap"))``: books and sequence numbers go
    on from one file to the next). ``symbols``: only these (OPRA: roots). ``types``: only these actions
    (``"add"``, ``"trade"``, ...) and/or message types (``"A"``, ``"100"``, ``"k"``).
    ``chunk``: an iterator of arrays of at most ``chunk`` events instead of one array.
    ``date``: the ITCH trading day (US Eastern) its times count from; ``"auto"``: the day
    the capture was received on (a BinaryFILE has none: give it). ``infer_length``: for BinaryFILEs whose
    length prefixes are wrong. ``templates``/``header_bytes``: OPRA FAST.
    ``progress``: percentage lines on stderr. A gap in a capture is a ``gap`` record.
    ``lines``: in a capture, the destination to read (``"233.54.12.111:26400"``), or the
    two of one feed's A and B lines, read arbitrated; by default the one the first packet
    goes to (a capture holding another is an error that names both).
    ``timestamps``: where ``ts_recv`` comes from: ``"capture"`` (the capture's record
    times) or ``"metawatch"`` (an Arista 7130 / Metamako MetaWatch tap's trailer on each
    frame; frames without one keep the capture's time, with a warning).
    """
    reader = _open(path, feed, symbols, types, date, infer_length, templates, header_bytes, max_orders, lines,
                   timestamps)
    if chunk is not None:
        if chunk <= 0:
            raise ValueError("chunk must be at least 1")
        return _chunks(reader, chunk, progress)
    if not progress:
        out = _wrap(reader.read_all(), reader.symbols(), reader.instruments())
        _warn_read(reader)
        return out
    parts = list(_chunks(reader, 1 << 20, progress))
    if not parts:
        return _wrap(np.empty(0, dtype=EVENT_DTYPE), reader.symbols(), reader.instruments())
    if len(parts) == 1:
        return parts[0]
    out = np.concatenate([np.asarray(p) for p in parts]).view(EventArray)
    out.symbols = reader.symbols()
    out.instruments = reader.instruments()
    return out


def export(
    path,
    format: str,
    out,
    feed: str = "itch50",
    schema: str = "mbo",
    *,
    symbols: Optional[Sequence[str]] = None,
    actions: Optional[Sequence[str]] = None,
    date: str = "auto",
    infer_length: bool = False,
    templates=None,
    header_bytes: int = 5,
    lines: Optional[Sequence[str]] = None,
    timestamps: str = "capture",
) -> dict:
    """Write a file's events (``path`` as for :func:`read`, a list of captures included) as ``"dbn"`` (``schema`` ``"mbo"`` or ``"mbp-1"``), ``"parquet"``
    (tickplant's events, a catalog directory), ``"nautilus"`` (NautilusTrader's order book
    deltas and trade ticks, a directory its ``ParquetDataCatalog`` reads) or ``"jsonl"``;
    returns the export's report (events, records, what the format has no record for, files,
    symbols)."""
    first, then = _paths(path)
    report = json.loads(
        _native.export(
            first, format, str(out), feed=feed, schema=schema, date=date,
            infer_length=infer_length, symbols=_names(symbols) or None,
            actions=_names(actions) or None,
            templates=None if templates is None else str(templates), header_bytes=header_bytes,
            lines=_names(lines), then=then, timestamps=timestamps,
        )
    )
    _warn_unnamed(report["unnamed"])
    for w in report["warnings"]:
        warnings.warn(w, stacklevel=2)
    return report


def read_parquet(path) -> EventArray:
    """The events of a Parquet file, or of every file of a catalog, that :func:`export` wrote."""
    return _wrap(_native.read_parquet(str(path)), {})


def read_dbn(path) -> EventArray:
    """The events of a DBN MBO file :func:`export` wrote, in the fields MBO carries
    (docs/python.md: the feed's message type, match numbers and venue are 0)."""
    return _wrap(_native.read_dbn(str(path)), {})


class Books:
    """Full-depth order books (tickplant's own) built from events."""

    def __init__(self, max_orders: Optional[int] = None, max_instruments: Optional[int] = None):
        self._b = _native.Books(max_orders=max_orders, max_instruments=max_instruments)

    def apply(self, events: np.ndarray) -> None:
        """Apply events (``EVENT_DTYPE``) in order."""
        self._b.apply(_event_bytes(events))

    def apply_bbo(self, events: np.ndarray) -> np.ndarray:
        """Apply events and return the best bid and offer of each one's instrument after
        it (``BBO_DTYPE``, one row an event)."""
        return np.frombuffer(self._b.apply(_event_bytes(events), bbo=True), dtype=BBO_DTYPE)

    def bbo(self, instrument_id: int):
        """(bid price, bid size, ask price, ask size), prices in 1e-9 units; 0 when empty."""
        return self._b.bbo(instrument_id)

    def depth(self, instrument_id: int, side: str, levels: int = 10):
        """The best ``levels`` levels of ``side`` (``"bid"``/``"ask"``): [(price, shares, orders)]."""
        return self._b.depth(instrument_id, side, levels)

    def instruments(self):
        return self._b.instruments()


def _event_bytes(events: np.ndarray) -> bytes:
    a = np.ascontiguousarray(np.asarray(events))
    if a.dtype != EVENT_DTYPE:
        raise TypeError(f"events must have EVENT_DTYPE, not {a.dtype}")
    return a.tobytes()


def bbo_series(events: np.ndarray, instrument_id: Optional[int] = None, every=None):
    """The best bid and offer after each event (``BBO_DTYPE``), from books built over
    ``events``; only ``instrument_id``'s rows where given. ``every`` (a pandas offset such as
    ``"1s"``) samples it by time instead: a pandas DataFrame of the last BBO in each interval."""
    rows = Books().apply_bbo(events)
    if instrument_id is not None:
        rows = rows[rows["instrument_id"] == instrument_id]
    if every is None:
        return rows
    import pandas as pd

    df = pd.DataFrame(rows)
    df["ts_event"] = pd.to_datetime(df["ts_event"].astype("int64"), unit="ns", utc=True)
    return df.set_index("ts_event").groupby("instrument_id").resample(every).last().drop(
        columns="instrument_id", errors="ignore"
    ).dropna()


class ArbResult:
    """What :meth:`Arbitrator.run` gives: the packets of both outputs (``PACKET_DTYPE``), the
    gaps, and the arbitrator's counters."""

    def __init__(self, hr, ll, gaps, stats):
        self.hr = np.frombuffer(hr, dtype=PACKET_DTYPE)
        self.ll = np.frombuffer(ll, dtype=PACKET_DTYPE)
        #: (output, first_seq, last_seq, messages, reason, at_ns) per gap, in order.
        self.gaps = gaps
        #: The counters, as `tickplant arb`'s report has them (per input, per output).
        self.stats = stats

    def gaps_frame(self):
        """The gaps as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.gaps, columns=["output", "first_seq", "last_seq", "messages", "reason", "at_ns"])

    def stats_frame(self):
        """Per input (A, B) and output (hr, ll), the counters as a pandas DataFrame."""
        import pandas as pd

        rows = {}
        for i, inp in enumerate(self.stats["inputs"]):
            rows["AB"[i] if i < 2 else str(i)] = inp
        rows["hr"] = self.stats["hr"]
        rows["ll"] = self.stats["ll"]
        return pd.DataFrame(rows).T


class Arbitrator:
    """A/B line arbitration of two captures (or one): ``tickplant arb``'s arbitrator, with its
    options as keywords (``protocol="moldudp64"``, ``mode="time"``, ``timeout_us=100``,
    ``max_msgs=...``, ``capacity_packets=...``, ``change_at=["2.5:count,max-msgs=100"]``)."""

    def __init__(self, a, b=None, **options):
        self._a = _native.Arbitrator(str(a), None if b is None else str(b), **options)

    def run(self) -> ArbResult:
        hr, ll, gaps, stats = self._a.run()
        return ArbResult(hr, ll, gaps, json.loads(stats))


class Matcher:
    """The strategy matcher (docs/matching.md): ``add("1: symbol = \"AAAA\" and price > 10")``,
    ``remove(id)``, ``match({"symbol": "AAAA", "price": 10.5})`` -> ids in ascending order;
    ``brute_force(event)`` checks every strategy (the oracle the index is held to)."""

    def __init__(self):
        self._m = _native.Matcher()

    def add(self, text: str) -> int:
        return self._m.add(text)

    def remove(self, strategy_id: int) -> bool:
        return self._m.remove(strategy_id)

    def match(self, event: dict):
        return self._m.match(event)

    def brute_force(self, event: dict):
        return self._m.brute_force(event)

    def memory_bytes(self) -> int:
        return self._m.memory_bytes()

    def __len__(self) -> int:
        return len(self._m)


class FastDecoder:
    """A FAST 1.1 decoder over templates (XML text or a path); the dictionary carries from
    message to message until :meth:`reset`."""

    def __init__(self, templates):
        self._d = _native.FastDecoder(str(templates))

    def decode(self, data: bytes, framing: str = "raw"):
        """Every message of ``data`` (framed ``"raw"``, ``"u32le"`` or ``"opra"``), as dicts
        (``tickplant fast decode``'s JSON)."""
        return [json.loads(line) for line in self._d.decode(bytes(data), framing).splitlines()]

    def reset(self) -> None:
        self._d.reset()


def run(config) -> dict:
    """Run the pipeline a TOML config describes (a path, or the TOML text) over its captures;
    the report ``tickplant run`` writes, as a dict."""
    return json.loads(_native.run(str(config)))


def plot_report(report, out_dir=None) -> dict:
    """Pictures of a run with matplotlib, as ``tickplant report`` draws them: the message
    rate, A/B wins and gaps over the day, stage and ring latency quantiles, consumers'
    deliveries and drops. ``report``: :func:`run`'s dict or the path of a report file. With
    ``out_dir``, each figure is written there as a PNG. Returns {name: figure}; a report of
    several feeds gives each feed's, named ``<feed>-<picture>``."""
    import matplotlib.pyplot as plt

    if not isinstance(report, dict):
        with open(report) as f:
            report = json.load(f)
    feeds = report["feeds"] if "feeds" in report else {"": report}
    figures = {}
    for feed, r in feeds.items():
        if "timeline" not in r:
            raise ValueError("not a report of tickplant run (no timeline)")
        t = r["timeline"]
        prefix = f"{feed}-" if feed else ""
        secs = np.arange(len(t["messages"]))

        fig, ax = plt.subplots(figsize=(8, 3))
        ax.bar(secs, t["messages"], width=1.0, color="#1f77b4")
        ax.set(title="Message rate over the day (HR stream)", xlabel="seconds from the first packet",
               ylabel="messages / s")
        figures[prefix + "rate"] = fig

        fig, ax = plt.subplots(figsize=(8, 3))
        ax.bar(secs, t["wins_a"], width=1.0, color="#1f77b4", label="won by A")
        ax.bar(secs, t["wins_b"], width=1.0, bottom=t["wins_a"], color="#ff7f0e", label="won by B")
        ax.set(title="A/B wins over the day", xlabel="seconds from the first packet", ylabel="packets / s")
        ax.legend()
        figures[prefix + "wins"] = fig

        fig, ax = plt.subplots(figsize=(8, 3))
        ax.bar(secs, t["messages_lost"], width=1.0, color="#d62728")
        ax.set(title="Gaps over the day: messages lost on both lines", xlabel="seconds from the first packet",
               ylabel="messages / s")
        figures[prefix + "gaps"] = fig

        rows = [(k, v) for k, v in r["latency_ns"].items() if v["count"]]
        rows += [(f"4 ring to {c['name']}", c["ring_latency_ns"]) for c in r["consumers"]
                 if c.get("ring_latency_ns", {}).get("count")]
        fig, ax = plt.subplots(figsize=(8, 1 + 0.5 * max(len(rows), 1)))
        for q, colour in (("max", "#7f7f7f"), ("p999", "#d62728"), ("p99", "#ff7f0e"), ("p90", "#2ca02c"),
                          ("p50", "#1f77b4")):
            ax.barh([k for k, _ in rows], [max(v[q], 1) for _, v in rows], color=colour, label=q)
        ax.set_xscale("log")
        ax.set(title="Stage and ring latency", xlabel="ns")
        ax.legend(fontsize="small")
        fig.tight_layout()
        figures[prefix + "latency"] = fig

        fig, ax = plt.subplots(figsize=(8, 1 + 0.5 * max(len(r["consumers"]), 1)))
        names = [c["name"] for c in r["consumers"]]
        ax.barh(names, [c["delivered"] for c in r["consumers"]], color="#2ca02c", label="delivered")
        ax.barh(names, [c["dropped"] for c in r["consumers"]], left=[c["delivered"] for c in r["consumers"]],
                color="#d62728", label="dropped")
        ax.set(title="Consumers: records delivered and dropped", xlabel="records")
        ax.legend(fontsize="small")
        fig.tight_layout()
        figures[prefix + "consumers"] = fig
    if out_dir is not None:
        import os

        os.makedirs(out_dir, exist_ok=True)
        for name, fig in figures.items():
            fig.savefig(os.path.join(out_dir, f"{name}.png"))
    return figures
