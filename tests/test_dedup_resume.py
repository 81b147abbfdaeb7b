"""A killed simq dedup (SIGKILL, Ctrl-C) continues from its last commit to the kept set of an uninterrupted run.

The venv's simq by path, killed at random moments; bench/dedup_kills.py does the same 20 times on a crawl.
"""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SIMQ = Path(sys.executable).with_name("simq")  # the venv's console script, by path

pytestmark = pytest.mark.slow  # processes, killed and started again


def as_foreground() -> None:
    """SIGINT at its default, as a shell's foreground command has it (see test_cli.as_foreground)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def corpus(path: Path, count: int = 12_000, seed: int = 3) -> None:
    rng = random.Random(seed)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(3000)]
    bodies = [" ".join(rng.choices(words, k=rng.randint(30, 120))) for _ in range(count // 3)]
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            body = rng.choice(bodies).split()
            for _ in range(rng.choice([0, 0, 1, 3, 10])):
                body[rng.randrange(len(body))] = rng.choice(words)
            handle.write(json.dumps({"id": f"d{i}", "text": " ".join(body)}) + "\n")


@pytest.fixture(autouse=True)
def often(monkeypatch):
    """Commits every 0.1 s (2 s by default), so that kills after a commit come early in these short runs."""
    monkeypatch.setenv("SIMQ_COMMIT_SECONDS", "0.1")


def command(data: Path, out: Path, *extra: str) -> list[str]:
    return [str(SIMQ), "dedup", str(data), "-o", str(out), "--dupes", str(out.with_suffix(".dupes")), *extra]


def decided(out: Path) -> int:
    try:
        return json.loads(out.with_name(out.name + ".resume").read_text())["decided"]
    except (OSError, ValueError, KeyError):
        return 0


def signal_after_first_commit(process: subprocess.Popen, out: Path, sig: int) -> None:
    """Send `sig` once the run writing `out` has committed a decision (or ended, or after 60 s)."""
    deadline = time.monotonic() + 60
    while process.poll() is None and decided(out) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(sig)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    data, out = folder / "data.jsonl", folder / "reference.jsonl"
    corpus(data)
    run = subprocess.run(command(data, out), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert 3000 < len(out.read_bytes().splitlines()) < 11_000
    # Every drop was judged by the exact Jaccard (the kept texts read back; after a resume, from the texts
    # written again as the kept documents were primed): the resumed runs must give the same lines.
    assert {json.loads(line)["checked_by"] for line in out.with_suffix(".dupes").read_bytes().splitlines()} == {"exact"}
    return data, out.read_bytes(), out.with_suffix(".dupes").read_bytes()


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(out.name) and p != out)


@pytest.mark.parametrize("memory", [None, "1M"])
def test_sigkill_at_random_moments_resumes_to_the_uninterrupted_kept_set(tmp_path, reference, memory):
    data, kept, dupes = reference
    out = tmp_path / "kept.jsonl"
    extra = ["--memory", memory] if memory else []
    rng = random.Random(memory or "none")
    resumed = 0
    for round in range(3):
        process = subprocess.Popen(command(data, out, *extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # The first kill and half the others after a commit past the last one, the rest at any moment
        # (start-up and the resumed run's reading of what was decided included).
        before, deadline = decided(out), time.monotonic() + 60
        if round == 0 or rng.random() < 0.5:
            while process.poll() is None and decided(out) <= before and time.monotonic() < deadline:
                time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.5))
        process.send_signal(signal.SIGKILL)
        _, stderr = process.communicate()
        assert b"Traceback" not in stderr
        if process.returncode == 0:
            break
        if out.exists():  # killed after its output took its place (while it ended): whole, as a finished run's
            assert out.read_bytes() == kept and not out.with_name(out.name + ".partial").exists()
            break
        resumed += decided(out) > 0
    run = subprocess.run(command(data, out, *extra), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert out.read_bytes() == kept and out.with_suffix(".dupes").read_bytes() == dupes
    assert leftovers(out) == []  # no partial files, no state, no spill folder
    assert resumed


def test_ctrl_c_commits_and_the_same_command_continues(tmp_path, reference):
    data, kept, dupes = reference
    out = tmp_path / "kept.jsonl"
    process = subprocess.Popen(command(data, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_foreground)
    signal_after_first_commit(process, out, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    if process.returncode == 0:
        pytest.skip("the dedup finished before the interrupt arrived")
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert "run the same command again to continue" in stderr
    stopped = decided(out)
    assert stopped > 0 and not out.exists()
    partial = out.with_name(out.name + ".partial").read_bytes()
    assert kept.startswith(partial) and partial.endswith(b"\n")  # whole lines, the first ones kept
    run = subprocess.run(command(data, out), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"continuing the interrupted run writing {out}: {stopped:,} documents were decided" in run.stderr
    assert out.read_bytes() == kept and out.with_suffix(".dupes").read_bytes() == dupes


def test_a_changed_argument_or_input_is_refused_and_restart_starts_again(tmp_path, reference):
    data, kept, _ = reference
    out = tmp_path / "kept.jsonl"
    process = subprocess.Popen(command(data, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    signal_after_first_commit(process, out, signal.SIGKILL)
    process.wait()
    if process.returncode == 0:
        pytest.skip("the dedup finished before the kill")
    other = subprocess.run(command(data, out, "--threshold", "0.7"), capture_output=True, text=True)
    assert other.returncode == 1 and "Traceback" not in other.stderr
    assert "interrupted run made with other arguments" in other.stderr and "--restart" in other.stderr
    changed = tmp_path / "data.jsonl"
    changed.write_bytes(data.read_bytes() + b'{"id": "new", "text": "one more"}\n')
    moved = subprocess.run(command(changed, out), capture_output=True, text=True)
    assert moved.returncode == 1 and "arguments and inputs" in moved.stderr
    assert decided(out) > 0  # refused: the interrupted run is still there
    again = subprocess.run(command(data, out, "--restart"), capture_output=True, text=True)
    assert again.returncode == 0 and "continuing" not in again.stderr, again.stderr
    assert out.read_bytes() == kept and leftovers(out) == []
    nothing = subprocess.run(command(data, out, "--resume"), capture_output=True, text=True)
    assert nothing.returncode == 1 and "nothing to resume" in nothing.stderr


def test_a_full_disk_is_one_line_and_the_same_command_finishes_once_there_is_room(reference, small_disk):
    data, kept, dupes = reference
    assert len(kept) > 1 << 20  # more than the disk holds
    out = small_disk / "kept.jsonl"
    full = subprocess.run(command(data, out, "--no-check", "-k", "3"), capture_output=True, text=True)
    assert full.returncode == 1 and "Traceback" not in full.stderr, full.stderr
    assert full.stderr.startswith("error: the disk holding") and str(out) in full.stderr
    assert not out.exists()
    partial = out.with_name(out.name + ".partial")
    if partial.exists():  # a commit came before the disk filled: whole lines only
        assert partial.read_bytes()[-1:] in (b"", b"\n")
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    done = subprocess.run(command(data, out, "--no-check", "-k", "3"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    again = subprocess.run(command(data, small_disk / "fresh.jsonl", "--no-check", "-k", "3"), capture_output=True)
    assert again.returncode == 0
    assert out.read_bytes() == (small_disk / "fresh.jsonl").read_bytes()
    assert out.with_suffix(".dupes").read_bytes() == (small_disk / "fresh.dupes").read_bytes()
    assert leftovers(out) == []


def test_a_stream_given_again_from_its_start_continues(tmp_path, reference):
    data, kept, dupes = reference
    out = tmp_path / "kept.jsonl"
    stream = [str(SIMQ), "dedup", "-", "-o", str(out), "--dupes", str(out.with_suffix(".dupes"))]
    with data.open("rb") as given:
        process = subprocess.Popen(stream, stdin=given, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        signal_after_first_commit(process, out, signal.SIGKILL)
        process.wait()
    if process.returncode == 0:
        pytest.skip("the dedup finished before the kill")
    assert decided(out) > 0
    with data.open("rb") as again:
        run = subprocess.run(stream, stdin=again, capture_output=True)
    assert run.returncode == 0, run.stderr
    assert b"continuing the interrupted run" in run.stderr
    assert out.read_bytes() == kept and out.with_suffix(".dupes").read_bytes() == dupes


class _Batch:
    """What ResumableOutput.write() reads of a DecidedBatch: its flags and counts (interrupted: a Ctrl-C lands
    while the batch is handed over)."""

    def __init__(self, n: int, interrupted: bool = False) -> None:
        self.n, self.interrupted = n, interrupted

    def kept_flags(self) -> bytes:
        if self.interrupted:
            raise KeyboardInterrupt
        return b"\x01" * self.n

    def counts(self) -> dict[str, int]:
        return {"read": self.n, "kept": self.n}


@pytest.mark.parametrize("dupes", [False, True])
def test_a_ctrl_c_while_a_batch_is_written_leaves_all_of_it_out(tmp_path, dupes):
    """dedup's handler commits after a Ctrl-C: the committed state must name the files' lines exactly, or the
    resumed run writes the interrupted batch's lines a second time."""
    from simhash_sqlite.pipeline.resume import ResumableOutput

    out = tmp_path / "kept.jsonl"
    side = str(tmp_path / "dupes.jsonl") if dupes else None
    written = ResumableOutput(str(out), side, {"k": 1}, [])
    assert written.open(None) is False
    written.write(_Batch(2), b'{"id": 1}\n{"id": 2}\n', b"")
    with pytest.raises(KeyboardInterrupt):
        written.write(_Batch(3, interrupted=True), b'{"id": 3}\n{"id": 4}\n{"id": 5}\n', b'{"id": 6}\n')
    written.commit()  # as dedup_commands does on KeyboardInterrupt
    for file in written.files:
        file.close()
    again = ResumableOutput(str(out), side, {"k": 1}, [])
    assert again.open(None) is True and again.decided == 2
    assert (tmp_path / "kept.jsonl.partial").read_bytes() == b'{"id": 1}\n{"id": 2}\n'
    assert (tmp_path / "kept.jsonl.resume-kept").read_bytes() == b"\x01\x01"
