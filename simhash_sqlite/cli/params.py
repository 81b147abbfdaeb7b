"""simq's parameters converted without pydantic: a start-up cost of every command, gone.

typer 0.2x converts each parameter of the command that runs through a pydantic TypeAdapter, built on
first use: importing pydantic and building a search's adapters cost about 0.1 s of a `simq near` that
otherwise takes 0.1-0.2 s. simq's parameters are all plain (str, int and float with an optional range,
bool, Path, lists of str), so they are converted here directly, with the same results and messages
naming the option; a parameter of any other kind still goes to typer's own conversion.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

PATCHED = "simq_plain"  # marks typer's method as ours: patched once
TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})


def use_plain_conversion() -> None:
    """Make typer convert simq's plain parameters here (plain_runtime), any other as it would."""
    parameter = getattr(typer.core, "_TyperParameter", None)
    original = getattr(parameter, "get_runtime_param", None)
    if parameter is None or original is None or getattr(original, PATCHED, False):
        return  # another typer: its own conversion

    def get_runtime_param(self):
        if self._runtime_param is None:
            self._runtime_param = plain_runtime(self.type_descriptor) or original(self)
        return self._runtime_param

    setattr(get_runtime_param, PATCHED, True)
    parameter.get_runtime_param = get_runtime_param


def plain_runtime(descriptor) -> Any:
    """typer's RuntimeParam for a plain parameter, or None for one of another kind."""
    try:
        from typer._coercion import RuntimeParam
    except ImportError:  # pragma: no cover (a typer without it)
        return None
    info = descriptor.parameter_info
    annotation = descriptor.annotation
    if info.parser is not None or getattr(info, "clamp", False) or descriptor.is_file or descriptor.is_choice:
        return None
    if annotation != list[str] and annotation not in (str, int, float, bool, Path):
        return None
    return _plain_class(RuntimeParam)(parameter_info=info, annotation=annotation)


@functools.cache
def _plain_class(runtime_param: type) -> type:
    """typer's RuntimeParam converting here, made once: a dataclass made for each parameter (about 0.8 ms: its
    methods are compiled) cost a command about 1 ms a parameter, again each time the app runs in one process
    (typer makes its parameters anew: about 9 ms of each of the tests' thousands of CliRunner calls)."""

    @dataclass(frozen=True)
    class Plain(runtime_param):
        def _coerce_value(self, value: Any, param, ctx) -> Any:
            info = self.parameter_info
            if self.annotation == list[str]:
                return [_convert(str, item, info, param, ctx) for item in value]
            return _convert(self.annotation, value, info, param, ctx)

    return Plain


def _convert(kind: type, value: Any, info, param, ctx) -> Any:
    bad = typer.BadParameter
    if kind is str:
        return _text(value)
    if kind is Path:
        from typer._param_types import coerce_cli_path

        path = value if isinstance(value, Path) else Path(_text(value))
        return coerce_cli_path(path, info, path_type=Path, param=param, ctx=ctx)
    if kind is bool:
        if isinstance(value, bool):
            return value
        word = _text(value).strip().lower()
        if word in TRUE or word in FALSE:
            return word in TRUE
        raise bad(f"{value!r} is not a valid boolean.", ctx=ctx, param=param)
    number = value if isinstance(value, kind) and not isinstance(value, bool) else _number(kind, _text(value))
    if kind is int and info.min is not None and info.max is not None and (number is None or not
                                                                         info.min <= number <= info.max):
        # A bounded whole number (--k): the text the library gives for the same value (settings.validate_k)
        name = param.opts[0].lstrip("-") if param.opts else param.name  # as typed: batch-size
        raise bad(f"{name} must be a whole number from {info.min} to {info.max}, not {_text(value)}", ctx=ctx,
                  param=param)
    if number is None:
        raise bad(f"{value!r} is not a valid {'integer' if kind is int else 'number'}.", ctx=ctx, param=param)
    if info.min is not None and number < info.min:
        raise bad(f"Input should be greater than or equal to {info.min}", ctx=ctx, param=param)
    if info.max is not None and number > info.max:
        raise bad(f"Input should be less than or equal to {info.max}", ctx=ctx, param=param)
    return number


def _number(kind: type, text: str) -> Any:
    """An int or float as pydantic reads one (ASCII digits; an int may be written 3.0, not 1e3), or None."""
    text = text.strip()
    if not text.isascii():
        return None
    try:
        return kind(text)
    except ValueError:
        pass
    whole, point, zeros = text.partition(".")
    if kind is int and zeros and zeros.strip("0") == "":  # 3.0, not 3. nor 3.5 nor 1e3
        return _number(int, whole)
    return None


def _text(value: Any) -> str:
    """A command-line value as text: bytes (an argv that was not decoded) decoded as typer does."""
    if isinstance(value, bytes):
        try:
            return value.decode(sys.getfilesystemencoding(), "surrogateescape")
        except UnicodeError:
            return value.decode("utf-8", "replace")
    return str(value)
