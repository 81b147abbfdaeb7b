"""The package is typed for its users (PEP 561): simhash_sqlite/py.typed is installed with it, so a
user's type checker reads our annotations instead of treating every name as Any. (.ci/run type-checks
the package itself with mypy; these tests look at it as an installed package, from outside the repo.)"""

import subprocess
import sys
from pathlib import Path

import pytest

import simhash_sqlite


def test_the_installed_package_carries_its_py_typed_marker():
    # CI installs the wheel (pip install '.[test,...]'): this is then the wheel's copy
    assert (Path(simhash_sqlite.__file__).parent / "py.typed").is_file()


def test_a_users_type_checker_reads_the_annotations(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install '.[test]'")
    script = tmp_path / "use.py"
    script.write_text(
        "from simhash_sqlite import SimhashIndex\n\n"
        "with SimhashIndex('x.db') as index:\n"
        "    found: int = index.near('some text')\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", script.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )
    # Without py.typed: 'Skipping analyzing "simhash_sqlite": ... missing library stubs or py.typed marker'
    assert "py.typed" not in result.stdout, result.stdout
    assert result.stdout.splitlines() == [
        'use.py:4: error: Incompatible types in assignment (expression has type "list[Match]", '
        'variable has type "int")  [assignment]'
    ], result.stdout + result.stderr
