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
HELPERS = {"common.py", "smoke.py"}  # the shared module and the runner itself


def in_bench(code: str) -> str:
    """Run Python code with bench/ importable, in a child (importing bench/common.py changes PYTHONPATH)."""
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(BENCH)!r})\n{code}"],
                          capture_output=True, text=True, check=True)
    return done.stdout


def test_every_script_has_a_smoke_line_and_a_readme_row():
    registered = set(json.loads(in_bench("import json, smoke; print(json.dumps([s.script for s in smoke.SMOKE]))")))
    scripts = {p.name for p in BENCH.glob("*.py")} - HELPERS
    assert scripts - registered == set(), "add a line to SMOKE in bench/smoke.py"
    assert registered - scripts == set(), "SMOKE names a script that is not in bench/"
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z_]+\.py)` \|", readme, re.M))
    assert scripts - listed == set(), "add a row to the table of bench/README.md"


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
