"""`python -m simhash_sqlite`, and the `simq` command's entry point (pyproject.toml).

main() imports the CLI when it is called, not when this module is imported: a process pool's worker
started by spawn imports the script that started its parent (pip's `simq` script imports this module),
and the CLI's imports (typer, rich, apsw, every layer of the package) cost each worker 0.1-0.3 CPU-s it
never uses.
"""

import _thread
import os
import signal
import sys

# OpenBLAS starts a thread per core when numpy is imported, and those threads cost 0.07 CPU-s of a
# process's 0.13 to import numpy, in simq and again in each pool worker (which inherits the environment).
# simq never calls BLAS where it pays to spread (the numpy reference's 256 x 8 products, calibrate's 2 x 2
# solve). Set before anything imports numpy; a value the user set stays.
BLAS_THREADS = "OPENBLAS_NUM_THREADS"

INTERRUPTED = 130  # the exit status of Ctrl-C, as simq's commands give it (cli/errors.py)
_MAIN_THREAD = _thread.get_ident()  # (this module is imported by the main thread)


def _interrupt_again(unraisable) -> None:
    """sys.unraisablehook: a Ctrl-C that lands in code whose exceptions Python cannot raise (an import lock's
    weakref callback, while a command imports a module it needs) would be printed as "Exception ignored"
    with a traceback, and the command would go on; it is delivered to the main thread again instead, where
    the command stops with its one line and 130. From another thread: in this one the hook itself would get
    it, and Python ignores that too (if it lands in such code again, it comes back here again)."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        if os.name == "nt":  # (os.kill with SIGINT would end the process there)
            _thread.start_new_thread(_thread.interrupt_main, ())
        else:  # a real signal, to the main thread: it wakes a call that sleeps or waits there, as the first did
            # (os.kill lets the kernel pick the thread, and the sending one took it at times: a sleep went on)
            _thread.start_new_thread(signal.pthread_kill, (_MAIN_THREAD, signal.SIGINT))
    else:
        sys.__unraisablehook__(unraisable)


def _print_near_on_terminal(notes: list[str], records: list[dict], report, k: int, format_: str) -> None:
    """The quick lane's near answer on a terminal, printed by the full command's own function (rich draws the
    table for the terminal; typer and the command modules stay unloaded)."""
    from .cli.reports import print_matches, say

    for note in notes:  # (as reports.tell_sketch_upgrade says it)
        say(note, to_stderr=True)
    print_matches(records, report, k, format_)


def main() -> None:
    os.environ.setdefault(BLAS_THREADS, "1")
    sys.unraisablehook = _interrupt_again
    try:
        from .quick.lane import run as quick

        # hash and near --key, where they answer alike without typer and numpy
        answered = quick(sys.argv[1:], on_terminal=_print_near_on_terminal)
        if answered is not None:
            raise SystemExit(answered)
        from .cli.app import main as run

        run()
    except KeyboardInterrupt:  # Ctrl-C while the CLI's modules load, before a command can catch it
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(INTERRUPTED) from None


if __name__ == "__main__":
    main()
