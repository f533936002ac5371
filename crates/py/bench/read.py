"""Reading an ITCH day into numpy: tickplant beside meatpy (a pure-Python ITCH reader)
and databento-dbn (decoding the same events from a DBN file), in the same run.

    .venv/bin/python crates/py/bench/read.py [--messages 2000000] [--meatpy-messages 200000]

The day is the demo's kind (`tickplant sim itch`, a BinaryFILE). meatpy is timed on the
first --meatpy-messages messages of the same file (it reads about a hundred thousand a
second); each figure is the best of --rounds.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import tickplant

ROOT = pathlib.Path(__file__).resolve().parents[3]


def best(rounds, f):
    t = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        n = f()
        t.append(time.perf_counter() - t0)
    return min(t), n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--meatpy-messages", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    binary = os.environ.get("TICKPLANT_BIN", str(ROOT / "target" / "release" / "tickplant"))
    with tempfile.TemporaryDirectory() as d:
        day = pathlib.Path(d) / "day.itch"
        subprocess.run([binary, "sim", "itch", "--messages", str(a.messages), "--out", str(day)], check=True,
                       capture_output=True)

        def ours():
            return len(tickplant.read(day, date="2026-11-20"))

        t_ours, n = best(a.rounds, ours)
        assert n == a.messages, n
        print(f"tickplant.read      {n:>9} messages  {t_ours:7.3f} s  {t_ours / n * 1e9:8.1f} ns/message")

        try:
            from meatpy.itch50 import ITCH50MessageReader
        except ImportError:
            ITCH50MessageReader = None
        if ITCH50MessageReader is not None:
            def meat():
                k = 0
                with ITCH50MessageReader(str(day)) as r:
                    for _ in r:
                        k += 1
                        if k == a.meatpy_messages:
                            break
                return k

            t_meat, k = best(1, meat)
            per = t_meat / k
            print(f"meatpy              {k:>9} messages  {t_meat:7.3f} s  {per * 1e9:8.1f} ns/message"
                  f"   tickplant is {per / (t_ours / n):.1f}x faster (target: 20x)")

        try:
            import databento_dbn
        except ImportError:
            databento_dbn = None
        if databento_dbn is not None:
            dbn = pathlib.Path(d) / "day.dbn"
            rep = tickplant.export(day, "dbn", dbn, date="2026-11-20")
            raw = dbn.read_bytes()

            def theirs():
                dec = databento_dbn.DBNDecoder()
                dec.write(raw)
                return len(dec.decode()) - 1

            t_dbn, r = best(a.rounds, theirs)
            assert r == rep["records"]
            per_event = t_dbn / rep["written_events"]
            print(f"databento-dbn       {r:>9} records   {t_dbn:7.3f} s  {per_event * 1e9:8.1f} ns/event"
                  f" ({rep['written_events']} events)   tickplant is {per_event / (t_ours / n):.1f}x as fast"
                  " (target: at least 1x)")


if __name__ == "__main__":
    sys.exit(main())
