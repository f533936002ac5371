"""docs/python.md's Python examples run, in a folder holding the simulated day they read."""

import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "python.md"
BIN = os.environ.get("TICKPLANT_BIN", str(ROOT / "target" / "debug" / "tickplant"))
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 5


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs")
    subprocess.run([BIN, "sim", "itch", "--messages", "200000", "--date", "2026-11-20", "--out", str(d / "day.pcap")],
                   check=True, capture_output=True)
    return d


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_example_runs(folder, n, monkeypatch):
    if "nautilus_trader" in BLOCKS[n]:
        # NautilusTrader is not one of the packages ./tp installs (it pins another pandas).
        pytest.importorskip("nautilus_trader")
    monkeypatch.chdir(folder)
    # The examples call the `tickplant` command as a user's shell finds it.
    monkeypatch.setenv("PATH", str(pathlib.Path(BIN).parent) + os.pathsep + os.environ.get("PATH", ""))
    exec(compile(BLOCKS[n], f"docs/python.md example {n + 1}", "exec"), {})
