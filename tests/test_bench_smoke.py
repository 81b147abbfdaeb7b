"""The bench scripts still run and still get the right answers: bench/smoke.py runs each one's small
mode and fails on a non-zero exit status or a NO. Speed is never asserted here."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
HELPERS = {"common.py", "smoke.py", "run.py"}  # the shared module, the registry with its small-mode runner, the runner


def in_bench(code: str) -> str:
    """Run Python code with bench/ importable, in a child (importing bench/common.py changes PYTHONPATH)."""
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(BENCH)!r})\n{code}"],
                          capture_output=True, text=True, check=True)
    return done.stdout


def test_every_script_has_a_smoke_line_and_a_readme_row():
    registered = set(json.loads(in_bench("import json, smoke; print(json.dumps([s.script for s in smoke.SMOKE]))")))
    scripts = {p.name for p in BENCH.glob("*.py")} - HELPERS
    registered -= {name for name in registered if name.endswith(".sh")}  # full size only: tested below
    assert scripts - registered == set(), "add a line to SMOKE in bench/smoke.py"
    assert registered - scripts == set(), "SMOKE names a script that is not in bench/"
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z_]+\.py)` \|", readme, re.M))
    assert scripts - listed == set(), "add a row to the table of bench/README.md"


def test_every_script_is_in_a_suite_with_a_small_mode_and_a_full_size_and_listed():
    lines = json.loads(in_bench("import json, run, smoke\n"
                                "print(json.dumps([[s.script, s.suite, s.args, s.full] for s in smoke.SMOKE]))"))
    suites = json.loads(in_bench("import json, run; print(json.dumps(list(run.SUITES)))"))
    scripts = {p.name for p in [*BENCH.glob("*.py"), *BENCH.glob("*.sh")]} - HELPERS
    assert {script for script, *_ in lines} == scripts, "one line in SMOKE (bench/smoke.py) a script"
    outside = [script for script, suite, _, _ in lines if suite not in suites]
    assert outside == [], "give each line a suite of bench/run.py's SUITES"
    small = {script for script, _, args, _ in lines if args is not None}
    assert {s for s in scripts if s.endswith(".py")} - small == set(), "give each script a small mode"
    full = {script for script, _, _, args in lines if args is not None}
    assert scripts - full == set(), "give each script its full-size arguments on one line"
    listed = subprocess.run([sys.executable, str(BENCH / "run.py"), "--list"], capture_output=True, text=True,
                            check=True).stdout
    assert {script.rsplit(".", 1)[0] for script in scripts} <= set(re.findall(r"^  (\w+)", listed, re.M))
    assert set(suites) <= set(re.findall(r"^(\w+):", listed, re.M))


def test_every_bench_script_the_docs_and_the_code_name_exists():
    """A merged or renamed script leaves no command behind (BENCHMARKS-LOG.md and CHANGELOG.md are history)."""
    root = BENCH.parent
    sources = [root / "README.md", root / "ARCHITECTURE.md", BENCH / "README.md", *root.glob("docs/*.md"),
               *root.glob("simhash_sqlite/**/*.py"), *BENCH.glob("*.py")]
    named = {(source.relative_to(root), name) for source in sources
             for name in re.findall(r"bench/([a-z_]+\.(?:py|sh|c))\b", source.read_text(encoding="utf-8"))}
    assert [(str(source), name) for source, name in sorted(named) if not (BENCH / name).exists()] == []


def test_run_writes_each_output_and_a_summary_skips_without_data_and_fails_on_a_failure(tmp_path):
    out = tmp_path / "out"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    runner = [sys.executable, str(BENCH / "run.py")]
    done = subprocess.run([*runner, "native", "quality", "--only", "core_speed", "--only", "accuracy", "--small",
                           "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = (out / "summary.md").read_text()
    assert "| native | [core_speed](core_speed.md) | ok |" in summary
    assert "--generated-mb 0.2" in (out / "core_speed.md").read_text()
    # Full size: threads_vs_pool.py has no crawl (skipped, saying so); core_speed.py fails on the files given.
    done = subprocess.run([*runner, "native", "decisions", "--only", "core_speed", "--only", "threads_vs_pool",
                           "--en", str(bad), "--zh", str(bad), "--out", str(out)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = (out / "summary.md").read_text()
    skipped = "| decisions | [threads_vs_pool](threads_vs_pool.md) | skipped | 0.0 | needs"
    assert f"{skipped} {out}/data/crawl.jsonl" in summary
    assert "| native | [core_speed](core_speed.md) | FAILED |" in summary and "0 ok, 1 failed, 1 skipped" in summary
    assert str(bad) in (out / "core_speed.md").read_text()
    done = subprocess.run([*runner, "nosuch", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode != 0 and done.stderr.startswith("error: unknown suite nosuch")


def test_the_runner_fails_on_an_exit_status_a_no_and_a_traceback_and_skips_without_a_package(tmp_path):
    scripts = {
        "good.py": "print('| exact | yes |')",
        "status.py": "import sys; print('all fine'); sys.exit(1)",
        "says_no.py": "print('| random-1M | 11 | near_many() | 0.9 | NO |')",
        "crashes.py": "import sys; sys.stderr.write('Traceback (most recent call last):\\n  boom\\n')",
    }
    for name, code in scripts.items():
        (tmp_path / name).write_text(code)
    got = json.loads(in_bench(f"""
import json, smoke
from pathlib import Path
folder = Path({str(tmp_path)!r})
lines = [smoke.Smoke(str(folder / name), "") for name in {sorted(scripts)!r}]
lines.append(smoke.Smoke(str(folder / "good.py"), "", needs=("no_such_module_here",)))
print(json.dumps([smoke.run(line, {{}}, folder / f"run{{i}}", 30)[0] for i, line in enumerate(lines)]))
"""))
    assert got == ["FAILED", "ok", "FAILED", "FAILED", "skipped"]  # crashes, good, says_no, status, needs


def test_a_script_over_its_time_is_a_failure_and_what_it_started_ends_with_it(tmp_path):
    (tmp_path / "hangs.py").write_text(
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(tmp_path / 'child')!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n")
    got = in_bench(f"""
import smoke
from pathlib import Path
folder = Path({str(tmp_path)!r})
status, seconds, detail = smoke.run(smoke.Smoke(str(folder / "hangs.py"), ""), {{}}, folder / "run", 3)
print(status, round(seconds))
""")
    assert got.split()[0] == "FAILED" and int(got.split()[1]) < 30
    child = Path(f"/proc/{int((tmp_path / 'child').read_text())}/stat")
    for _ in range(50):  # killed with its session; gone once reaped (a zombie until then)
        if not child.exists() or child.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the script's child outlived the time-out")


@pytest.mark.slow
def test_every_bench_script_passes_its_smoke_run(tmp_path):
    done = subprocess.run([sys.executable, str(BENCH / "smoke.py"), "--keep", str(tmp_path)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert re.search(r"^(\d+) of \1 passed or skipped", done.stdout, re.M), done.stdout[-3000:]
