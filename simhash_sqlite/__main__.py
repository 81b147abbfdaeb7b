"""`python -m simhash_sqlite`, and the `simq` command's entry point (pyproject.toml).

main() imports the CLI when it is called, not when this module is imported: a process pool's worker
started by spawn imports the script that started its parent (pip's `simq` script imports this module),
and the CLI's imports (typer, rich, apsw, every layer of the package) cost each worker 0.1-0.3 CPU-s it
never uses.
"""


def main() -> None:
    from .cli.app import main as run

    run()


if __name__ == "__main__":
    main()
