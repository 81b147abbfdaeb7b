"""simq dedup killed at random moments, again and again, resumes to the kept set of an uninterrupted run.

    python bench/dedup_kills.py [--pages N] [--kills K] [--memory SIZE] [--seed S] [--commit-seconds S]

Writes N synthetic crawl pages (bench/scale.py's) to a temporary JSONL file, runs `simq dedup` on them once
uninterrupted (the reference), then runs the same command until it has been killed K times, each at a random
moment of its run (half of them just after a fresh commit; SIGKILL, or every third time SIGINT as Ctrl-C sends
it), every run continuing the last (a run that finished before its kill starts the next from nothing), and a
final run to the end. The kept records and the --dupes file must equal the
reference byte for byte, with no partial file, state or spill folder left. Prints one JSON line. Small
mode for bench/smoke.py: --pages 3000 --kills 3.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from common import SIMQ, Failures, print_machine
from scale import generate


def state(out: Path) -> int:
    try:
        return json.loads(out.with_name(out.name + ".resume").read_text())["decided"]
    except (OSError, ValueError, KeyError):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=30_000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--memory", default="4M", help="dedup's --memory (small: the spilled kept set is resumed too)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--commit-seconds", default="0.5",
                        help="SIMQ_COMMIT_SECONDS of the runs (2 s by default: few commits in a short run)")
    args = parser.parse_args()
    print_machine()
    failures = Failures()
    rng = random.Random(args.seed)
    os.environ["SIMQ_COMMIT_SECONDS"] = args.commit_seconds  # for every simq started below
    with tempfile.TemporaryDirectory(prefix="simq-kills-") as folder:
        data = Path(folder) / "pages.jsonl"
        with data.open("wb") as handle:
            generate(args.pages, handle)

        def command(out: Path) -> list[str]:
            return SIMQ + ["dedup", str(data), "-o", str(out),
                    "--dupes", str(out.with_suffix(".dupes")), "--memory", args.memory]

        reference = Path(folder) / "reference.jsonl"
        started = time.perf_counter()
        subprocess.run(command(reference), check=True, capture_output=True)
        seconds = time.perf_counter() - started
        out = Path(folder) / "kept.jsonl"
        kills = interrupts = finished_early = progress = number = 0
        decided_at_kills = []
        while kills + interrupts < args.kills and number < 10 * args.kills:
            number += 1
            process = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            # Half the kills come after a commit past the last one (so that the runs get further), half at any
            # moment of a run as long as the uninterrupted one (start-up and the re-reading of what was
            # decided included).
            if number % 2 == 0:
                before, deadline = state(out), time.monotonic() + 10 * seconds
                while process.poll() is None and state(out) <= before and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(rng.uniform(0, min(1.0, seconds / 2)))  # (a resumed run has less left to do)
            else:
                time.sleep(rng.uniform(0.05, seconds))
            sent = signal.SIGINT if number % 3 == 2 else signal.SIGKILL
            process.send_signal(sent)
            _, stderr = process.communicate()
            if b"Traceback" in stderr:
                raise SystemExit(f"a traceback after a kill:\n{stderr.decode()}")
            if process.returncode == 0:
                finished_early += 1
                out.unlink()  # start again from nothing
                continue
            kills += sent == signal.SIGKILL
            interrupts += sent == signal.SIGINT
            # (-2: the signal came before Python set its handler, as a Ctrl-C at start-up does)
            if sent == signal.SIGINT and process.returncode not in (130, -signal.SIGINT):
                raise SystemExit(f"Ctrl-C gave exit status {process.returncode}: {stderr.decode()}")
            decided_at_kills.append(state(out))
            progress += len(decided_at_kills) > 1 and decided_at_kills[-1] > decided_at_kills[-2]
        final = subprocess.run(command(out), capture_output=True, text=True)
        if final.returncode != 0:
            raise SystemExit(final.stderr)
        same = out.read_bytes() == reference.read_bytes()
        same_dupes = out.with_suffix(".dupes").read_bytes() == reference.with_suffix(".dupes").read_bytes()
        left = sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("kept.jsonl") and p != out)
        result = {"pages": args.pages, "memory": args.memory, "reference_s": round(seconds, 1),
                  "sigkills": kills, "ctrl_c": interrupts, "finished_before_the_kill": finished_early,
                  "kills_after_progress": progress, "decided_at_kills": decided_at_kills,
                  "kept": len(reference.read_bytes().splitlines()), "kept_identical": same,
                  "dupes_identical": same_dupes, "left_behind": left, "load": os.getloadavg()}
        print(json.dumps(result))
        failures.expect(same, "the kept records differ from the uninterrupted run's")
        failures.expect(same_dupes, "the --dupes file differs from the uninterrupted run's")
        failures.expect(not left, f"files left beside the output: {left}")
    failures.exit()


if __name__ == "__main__":
    main()
