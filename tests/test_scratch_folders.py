"""Scratch folders of killed runs (find/external.py ScratchFolder, dedup's SpillFolder): a run killed with
SIGKILL cannot remove its folder, so the next run that makes one removes every folder whose owner is dead,
and never a live run's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

import pytest
from typer.testing import CliRunner

from simhash_sqlite import Document, SimhashIndex
from simhash_sqlite.cli.app import app
from simhash_sqlite.errors import InvalidArgument
from simhash_sqlite.find.external import ScratchFolder, remove_dead_scratch
from simhash_sqlite.pipeline.spill import SpillFolder

# A process that makes a scratch folder (or dedup's spill folder beside an output), writes a file in it,
# says where, and waits to be killed.
HOLDER = """
import sys, time
from simhash_sqlite.find.external import ScratchFolder
from simhash_sqlite.pipeline.spill import SpillFolder
kind, where = sys.argv[1], sys.argv[2]
folder = ScratchFolder(where or None) if kind == "scratch" else SpillFolder(where or None)
with open(folder.new_file(".runs"), "wb") as handle:
    handle.write(b"x" * 100)
print(folder.path, flush=True)
time.sleep(600)
"""


def _holder(kind: str, where: str, tmpdir: str | None = None) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, TMPDIR=tmpdir) if tmpdir else None
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, kind, where], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    path = proc.stdout.readline().strip()
    assert path and os.path.isdir(path), f"the holder made no folder ({proc.poll()})"
    return proc, path


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_a_killed_runs_scratch_is_removed_by_the_next_run_and_a_live_ones_kept(tmp_path):
    dead, dead_path = _holder("scratch", str(tmp_path))
    live, live_path = _holder("scratch", str(tmp_path))
    try:
        _kill(dead)
        assert os.path.isdir(dead_path), "SIGKILL leaves the folder"
        assert os.path.basename(dead_path).startswith(f"simq-dupes-{dead.pid}-")
        with ScratchFolder(str(tmp_path)) as mine:
            mine.new_file(".runs")
            assert not os.path.exists(dead_path)
            assert os.path.isdir(live_path) and os.listdir(live_path)
            assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(live_path), os.path.basename(mine.path)])
        assert os.listdir(tmp_path) == [os.path.basename(live_path)]
    finally:
        _kill(live)
    assert remove_dead_scratch(str(tmp_path)) == [live_path]
    assert os.listdir(tmp_path) == []


def test_folders_not_of_simq_are_left_alone(tmp_path):
    (tmp_path / "simq-dupes-notapid").mkdir()
    (tmp_path / "other-123-x").mkdir()
    (tmp_path / f"simq-dupes-{os.getpid()}-live").mkdir()  # no lock, but its pid lives: left
    assert remove_dead_scratch(str(tmp_path)) == []
    assert len(os.listdir(tmp_path)) == 3


def test_dupes_past_its_budget_removes_a_killed_runs_scratch(tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    killed = [_holder("scratch", "", str(scratch)), _holder("spill", "", str(scratch))]  # dupes' and dedup's
    for proc, path in killed:
        _kill(proc)
        assert os.path.dirname(path) == str(scratch)
    assert len(os.listdir(scratch)) == 2
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    db = tmp_path / "index.db"
    with SimhashIndex(db, create=True) as index:
        index.add([Document("a", "one two three four five six seven"), Document("b", "one two three four five six")])
    result = CliRunner().invoke(app, ["dupes", "--db", str(db), "--memory", "1M", "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert os.listdir(scratch) == []


def test_dedups_spill_beside_a_killed_runs_output_is_removed_and_a_live_ones_refused(tmp_path):
    output = str(tmp_path / "kept.jsonl")
    dead, dead_path = _holder("spill", output)
    _kill(dead)
    assert dead_path == output + ".spill" and os.path.isdir(dead_path)
    folder = SpillFolder(output)  # the next run for that output
    assert not os.path.exists(dead_path)
    folder.close()
    live, live_path = _holder("spill", output)
    try:
        with pytest.raises(InvalidArgument, match="another simq run is writing"):
            SpillFolder(output)
        assert os.path.isdir(live_path) and os.listdir(live_path)
    finally:
        _kill(live)
