"""How fingerprints are made: the settings an index records and every later add or query reuses."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, fields

from ..errors import InvalidArgument, InvalidInput, SettingsMismatch

# Importable here as before; rule.py says why each has its value (the extension's header is made from it).
from .rule import (  # noqa: F401
    ALGORITHM_VERSION,
    CONFIRM_K,
    DEFAULT_NGRAM,
    DEFAULT_THRESHOLD,
    DEFAULT_WEIGHTS,
    HASH_SCHEME,
    RECOMMENDED_K,
)

FEATURE_KINDS = ("chars", "words")
WEIGHT_KINDS = ("count", "log", "binary")
# On a corpus of texts under this many characters, precision at RECOMMENDED_K fell to 0.37-0.59
# (bench/quality.py --lengths 12,200): for them, use k <= 8 or check candidates exactly.
SHORT_TEXT = 200


def validate_k(k) -> int:
    """A Hamming radius as a plain int: a whole number from 0 to 64 (numpy integers too)."""
    if not (isinstance(k, int) or _numpy_integer(k)) or isinstance(k, bool) or not 0 <= k <= 64:
        raise InvalidArgument(f"k must be a whole number from 0 to 64, not {k!r}")
    return int(k)


def _numpy_integer(value) -> bool:
    """Whether value is a numpy integer, without importing numpy (a third of simq's start-up): where numpy
    is not imported yet, nothing is one."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.integer)


def default_k(check: bool) -> int:
    """The candidate radius when none is given: CONFIRM_K when checking, else RECOMMENDED_K."""
    return CONFIRM_K if check else RECOMMENDED_K


def candidate_k(k: int | None, check: bool) -> int:
    """The candidate radius: an explicit k (validated: a library's entry calls this), else default_k()."""
    return default_k(check) if k is None else validate_k(k)


@dataclass(frozen=True)
class FingerprintSettings:
    """Everything that shapes a fingerprint.

    features: "chars" (character n-grams of the normalized text) or "words" (word n-grams; Chinese
        runs are cut by jieba, other text split into lower-cased words).
    ngram: n of the n-grams (1 = single characters or single words).
    weights: "binary" (1 per distinct feature, the default), "count" (term frequency) or "log"
        (1 + ln count).
    hmm: jieba's HMM for unknown words; only used with features="words".
    """

    features: str = "chars"
    ngram: int = DEFAULT_NGRAM
    weights: str = DEFAULT_WEIGHTS
    hmm: bool = False
    hash: str = HASH_SCHEME
    version: int = ALGORITHM_VERSION

    def __post_init__(self) -> None:
        if self.features not in FEATURE_KINDS:
            raise InvalidArgument(f"features must be one of {', '.join(FEATURE_KINDS)}, not {self.features!r}")
        if self.weights not in WEIGHT_KINDS:
            raise InvalidArgument(f"weights must be one of {', '.join(WEIGHT_KINDS)}, not {self.weights!r}")
        if isinstance(self.ngram, bool) or not isinstance(self.ngram, int) or not 1 <= self.ngram <= 16:
            raise InvalidArgument(f"ngram must be a whole number from 1 to 16, not {self.ngram!r}")
        if not isinstance(self.hmm, bool):
            raise InvalidArgument(f"hmm must be true or false, not {self.hmm!r}")
        if self.hash != HASH_SCHEME:
            raise InvalidInput(f"unknown feature hash {self.hash!r} (this version knows {HASH_SCHEME})")
        if self.version != ALGORITHM_VERSION:
            raise InvalidInput(
                f"fingerprints of algorithm version {self.version} are not supported "
                f"(this version makes version {ALGORITHM_VERSION})"
            )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FingerprintSettings:
        """The settings an index recorded; InvalidInput (naming what is wrong) for anything else."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise InvalidInput(f"not a JSON object: {text[:60]!r}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidInput(f"the index records unknown fingerprint settings: {', '.join(sorted(unknown))}")
        return cls(**data)

    def describe(self) -> str:
        text = f"{self.features} {self.ngram}-grams, {self.weights} weights"
        if self.features == "words":
            text += f", jieba HMM {'on' if self.hmm else 'off'}"
        return text

    def merged(self, **requested) -> FingerprintSettings:
        """These settings, checked against what a caller asked for (None = not asked).

        Asking for a value other than the recorded one is an error: fingerprints made with other
        settings would silently never match the ones in the index.
        """
        for name, value in requested.items():
            if value is not None and getattr(self, name) != value:
                raise SettingsMismatch(
                    f"this index was built with {name}={getattr(self, name)!r}; you asked for {name}={value!r} "
                    "(fingerprints with other settings would never match; leave it out, or use another index file)",
                    name, getattr(self, name), value,
                )
        return self
