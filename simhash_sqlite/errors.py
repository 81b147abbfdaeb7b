"""Exceptions raised by simhash_sqlite. The CLI prints their message as one line, and every surface shows user
data in one through printable()."""


def printable(value: object) -> str:
    """A value as one line of plain text: control characters (newlines, escapes, NUL) shown as
    Python writes them in a string literal, so no key can break a row, a page or drive the terminal."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class SimhashError(Exception):
    """Base class: every error the library raises on purpose."""


class IndexNotFound(SimhashError):
    """The index file does not exist and the operation would not create it."""


class NotAnIndex(SimhashError):
    """The file is not a SQLite database, or not one made by simhash-sqlite."""


class ForeignSchema(NotAnIndex):
    """The file is marked as ours but holds schema objects (triggers, views, tables...) we did not create."""


class SchemaTooNew(SimhashError):
    """The file was written by a newer simhash-sqlite than this one."""


class SettingsMismatch(SimhashError):
    """Fingerprint settings asked for differ from the ones the index was built with. name, recorded and
    requested say which setting (a keyword of SimhashIndex) and its two values, for a surface to phrase."""

    def __init__(self, message: str, name: str | None = None, recorded: object = None, requested: object = None):
        super().__init__(message)
        self.name, self.recorded, self.requested = name, recorded, requested


class MissingExtra(SimhashError):
    """An optional dependency is not installed; the message names the extra that brings it."""


class InvalidInput(SimhashError):
    """An argument or a document that cannot be used (bad k, bad hex, no features...)."""


class DamagedIndex(SimhashError):
    """The index file fails SQLite's quick check: writing to it would spread the damage."""


class InvalidArgument(InvalidInput):
    """An argument out of its range or of the wrong kind (a k of 65, a threshold of 0, an unknown format):
    the command line's usage error, exit status 2."""


class InvalidMetadata(SimhashError):
    """A setting the index records in simhash_meta is not one simhash-sqlite writes (changed by other
    software, or by hand): the message names the key. The index is not used."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.key, self.problem = key, problem
        super().__init__(
            f"{path}: its setting simhash_meta {key!r} is not valid ({problem}); the file was changed by other "
            f"software; nothing was done (see: simq integrity --db {path})"
        )


class DiskFull(SimhashError):
    """The disk (or the file system) holding a file is full, or SQLite could not read or write it: the
    message names the file; nothing was written."""
