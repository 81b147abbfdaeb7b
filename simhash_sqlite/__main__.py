"""`python -m simhash_sqlite`, and the `simq` command's entry point (pyproject.toml).

main() imports the CLI when it is called, not when this module is imported: a process pool's worker
started by spawn imports the script that started its parent (pip's `simq` script imports this module),
and the CLI's imports (typer, rich, apsw, every layer of the package) cost each worker 0.1-0.3 CPU-s it
never uses.
"""

import os
import sys

# OpenBLAS starts a thread per core when numpy is imported, and those threads cost 0.07 CPU-s of a
# process's 0.13 to import numpy, in simq and again in each pool worker (which inherits the environment).
# simq never calls BLAS where it pays to spread (the numpy reference's 256 x 8 products, calibrate's 2 x 2
# solve). Set before anything imports numpy; a value the user set stays.
BLAS_THREADS = "OPENBLAS_NUM_THREADS"

INTERRUPTED = 130  # the exit status of Ctrl-C, as simq's commands give it (cli/errors.py)


def main() -> None:
    os.environ.setdefault(BLAS_THREADS, "1")
    try:
        from .cli.app import main as run

        run()
    except KeyboardInterrupt:  # Ctrl-C while the CLI's modules load, before a command can catch it
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(INTERRUPTED) from None


if __name__ == "__main__":
    main()
