"""The loadable extension builds anywhere the package builds: from the sdist, on a machine without SQLite's
development headers (the vendored ones in simhash_sqlite/native/vendor/sqlite/ are used), into a wheel
tagged for the platform whose extension loads and answers."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import apsw
import pytest

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ROOT / "simhash_sqlite" / "native" / "vendor" / "sqlite"


def search_path(compiler: str) -> list[Path]:
    """The compiler's #include <...> folders, in order (GCC and Clang print them for -v)."""
    run = subprocess.run([compiler, "-xc", "-E", "-v", os.devnull], capture_output=True, text=True)
    said = run.stderr
    if "#include <...> search starts here:" not in said:
        pytest.skip(f"{compiler} does not list its include folders (-v): not GCC or Clang")
    block = said.split("#include <...> search starts here:", 1)[1].split("End of search list.", 1)[0]
    return [Path(line.strip().split(" (")[0]) for line in block.strip().splitlines()]


def compiler_without_sqlite_headers(tmp: Path) -> str:
    """A CC for which no system folder holds sqlite3.h or sqlite3ext.h: the compiler's own search path,
    each folder holding them replaced by a folder of links to everything else in it."""
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler here")
    folders = []
    for i, folder in enumerate(search_path(compiler)):
        if (folder / "sqlite3.h").exists() or (folder / "sqlite3ext.h").exists():
            copy = tmp / f"include{i}"
            copy.mkdir()
            for entry in folder.iterdir():
                if entry.name not in ("sqlite3.h", "sqlite3ext.h"):
                    (copy / entry.name).symlink_to(entry)
            folder = copy
        folders.append(folder)
    cc = " ".join([shutil.which(compiler) or compiler, "-nostdinc", *(f"-isystem {f}" for f in folders)])
    probe = tmp / "probe.c"
    probe.write_text("#include <sqlite3ext.h>\n#include <stdio.h>\n")
    run = subprocess.run([*cc.split(), "-fsyntax-only", str(probe)], capture_output=True, text=True)
    assert run.returncode and "sqlite3ext.h" in run.stderr, "the system's header is still on the include path"
    return cc


def hatchling_sdist(tmp: Path) -> Path:
    """The sdist, as `python -m build --sdist` makes it (hatchling, installed into a folder of its own)."""
    backend = tmp / "backend"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(backend), "hatchling>=1.18"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    if run.returncode:
        pytest.skip(f"the build backend (hatchling) cannot be installed here: {run.stderr.strip()[-200:]}")
    out = tmp / "sdist"
    env = {**os.environ, "PYTHONPATH": str(backend)}
    run = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(out)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    (sdist,) = out.glob("*.tar.gz")
    return sdist


@pytest.mark.slow  # a backend install, an sdist, a wheel built from it: about 30 s
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX compiler flags")
def test_the_sdist_builds_a_platform_wheel_whose_extension_loads_without_system_sqlite_headers(tmp_path):
    cc = compiler_without_sqlite_headers(tmp_path)
    sdist = hatchling_sdist(tmp_path)
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    native = "simhash_sqlite/native/"
    for needed in ("vendor/sqlite/sqlite3.h", "vendor/sqlite/sqlite3ext.h", "sqlite_extension.c", "simhash_core.c"):
        assert any(name.endswith("/" + native + needed) for name in names), needed
    assert any(name.endswith("/hatch_build.py") for name in names)
    out = tmp_path / "wheel"
    env = {**os.environ, "CC": cc, "CFLAGS": "-O0"}  # ours first, then these: a quick build
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(sdist)],
                         env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "not built" not in run.stderr, run.stderr
    (wheel,) = out.glob("*.whl")
    assert not wheel.name.endswith("-none-any.whl") and re.search(r"-cp3\d+-cp3\d+t?-\w+\.whl$", wheel.name), wheel.name
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
        assert not [n for n in z.namelist() if "/vendor/" in n]  # the headers build it; the wheel needs none
    native = site / "simhash_sqlite" / "native"
    libraries = list(native.glob("simhash.*"))
    assert libraries, f"the extension was not built: {(native / '_build.json').read_text()}"
    (library,) = libraries
    conn = apsw.Connection(":memory:")
    conn.enable_load_extension(True)
    conn.load_extension(str(library))
    assert conn.execute("SELECT simhash_hex(simhash('hello world')), hamming(-1, 0)").get == ("535e078da051fa3c", 64)
    assert conn.execute("SELECT count(*) FROM pragma_module_list WHERE name = 'simhash_near'").get == 1


def test_the_vendored_headers_are_the_ones_the_readme_names():
    readme = (VENDORED / "README.md").read_text()
    version = re.search(r"SQLite (\d+\.\d+\.\d+)", readme)
    assert version is not None
    header = (VENDORED / "sqlite3.h").read_text()
    assert f'#define SQLITE_VERSION        "{version.group(1)}"' in header
    import hashlib

    for name in ("sqlite3.h", "sqlite3ext.h"):
        digest = hashlib.sha256((VENDORED / name).read_bytes()).hexdigest()
        assert f"{digest}  {name}" in readme, name


def test_the_committed_webassembly_was_built_from_these_sources():
    """wasm/build.sh records the sha256 of every source it compiled: a C change without a rebuild of the page's
    SQLite (simhash_sqlite/web/browser/) fails here, where no emcc is needed to see it."""
    recorded = (ROOT / "simhash_sqlite" / "web" / "browser" / "sources.sha256").read_text().splitlines()
    stale = []
    for line in recorded:
        digest, name = line.split(maxsplit=1)
        path = ROOT / name
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            stale.append(name)
    assert recorded and stale == [], f"rebuild with wasm/build.sh: changed since the committed build: {stale}"
