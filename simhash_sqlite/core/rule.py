"""The numbers of the rule that judges a pair, and the settings the loadable extension must share: the one
place they are written.

Plain literal assignments only (no imports, no expressions): the build reads this file with `ast`
(native/gen_rule_constants.py) and writes _rule_constants.h, which native/sqlite_extension.c includes, so
the C side never copies a number by hand. The modules that use a constant import it from here and keep
its name importable where it always was (core.settings.CONFIRM_K, find.verdict.CERTAIN, ...).
simhash_version() in SQL gives these values and their digest, on both sides.
"""

# -- the check: when a pair is a near-duplicate ------------------------------------------------------------

# The exact 5-shingle Jaccard from which two texts are near-duplicates (docs/quality.md).
DEFAULT_THRESHOLD = 0.8

# Chosen by bench/quality.py (BENCHMARKS.md, issue 5) against the truth "Jaccard of character
# 5-shingles >= 0.8": character 5-grams with binary weights beat counts by 0.02-0.05 F1 in Chinese and
# English; word 3-grams were within 0.01 (noise) but need a tokenizer. RECOMMENDED_K is where the F1
# of fingerprints alone peaks (and the farthest distance a pair judged by distance alone is kept);
# CONFIRM_K finds 96% of those pairs as candidates for an exact check.
RECOMMENDED_K = 9
CONFIRM_K = 12

# An estimate at least this sure (sketch.certainty) is not listed as uncertain where no text is at hand:
# about 3.1 standard deviations from the threshold. bench/certainty.py: on 20,000 generated pairs 2 such
# verdicts of 14,047 were wrong, and 70% of the verdicts at J 0.6-1.0 were this sure.
CERTAIN = 0.999

# An estimate below the threshold at least this sure drops the pair without reading its texts (the sketch
# filters candidates; where both texts are at hand every other verdict is exact). Far stricter than
# CERTAIN: a wrong drop here is a pair lost silently. Two pairs at certainty 0.9995 had estimates 0.722 and
# 0.727 against exact 0.809 and 0.800; on the tuning and held-out sets (bench/certainty_texts.py) the surest
# true pair estimated below 0.8 was at 0.9983, and no true pair was lost at any cut from 0.999 up.
FILTER_CERTAIN = 0.999999

# The estimate's spread measured 5-12% above the model at 20-6,000 shingles near the line (generated
# pairs, bench/certainty.py): core/sketch.pair_spread multiplies by this rather than fitting each size.
SPREAD_FACTOR = 1.12

# A size ratio this far below the threshold rules the pair out (J <= min/max). The sketch and the exact check
# count the same shingles (of the normalised text), so the bound holds up to the sizes' 16-bit log coding: on
# the tuning sets (bench/certainty_texts.py --filter) the sketches' ratio was within 0.00075 of the exact
# sets' (0 for texts under about 1,000 shingles), and no true pair had a ratio below the threshold. (0.01
# while the exact check kept case: two pairs of ratio 0.798-0.799 had an exact Jaccard of 0.801.)
RATIO_SLACK = 0.002

# The exact check's shingles: distinct hashes of the 5-character runs of features.normalize(text).
TRUTH_NGRAM = 5

# Texts up to this size (32 MiB) are read whole (by add, and for a check); larger ones are fingerprinted
# in pieces and never held whole, so a check cannot compare them: they are judged by distance alone.
READ_WHOLE_BYTES = 33554432

# -- short texts' exact data (core/short_texts.py says how these were chosen) -------------------------------

# A text whose stored form (1 byte + its whitespace-folded text deflated) takes at most this is kept.
SHORT_TEXT_BYTES = 352
# Longer texts (characters, or UTF-8 bytes once folded) are not tried: on the tuning set no text of more
# than 744 UTF-8 bytes deflated to SHORT_TEXT_BYTES.
SHORT_TEXT_MOST = 1024
# Nor are texts of more bytes than this to deflate (of the folded text, in the encoding stored): deflate
# is most of the data's cost, and no text of the tuning set or of a crawl's 32k of more than 744 bytes took
# SHORT_TEXT_BYTES.
SHORT_TEXT_DEFLATED_MOST = 768
# The stored form's format (a reader refuses any other).
SHORT_TEXT_FORMAT = 1
# The most a stored form may inflate to (2 * SHORT_TEXT_MOST): UTF-16 takes at most 2 bytes a UTF-8 byte,
# and indexes made before SHORT_TEXT_DEFLATED_MOST hold texts of up to SHORT_TEXT_MOST UTF-8 bytes.
SHORT_TEXT_READ_MOST = 2048

# -- the search's cost model (find/search.py) ---------------------------------------------------------------

# In nanoseconds, measured at 10M random fingerprints (bench/search.py and interleaved runs of both plans
# forced, BENCHMARKS.md, issue 3); only their ratios matter.
PROBE_SEEK_NS = 1500  # one index seek for one probed block value
PROBE_ROW_NS = 160  # one candidate read from a block index (group_concat, parsed, checked)
SCAN_ROW_NS = 2  # one fingerprint checked by the numpy scan, the array already in memory
SCAN_LOAD_ROW_NS = 220  # one fingerprint read into the scan array (once per change of the index)

# -- how fingerprints and sketches are made by default (core/settings.py, core/sketch.py) -------------------

# Bumped whenever the same settings would give different fingerprints.
ALGORITHM_VERSION = 1
HASH_SCHEME = "blake2b64+splitmix64"
# Character 5-grams with binary weights: see RECOMMENDED_K above.
DEFAULT_NGRAM = 5
DEFAULT_WEIGHTS = "binary"
# The default sketch scheme (core/sketch.DEFAULT_SCHEME, chosen by bench/sketch_choice.py): 944 one-bit
# bins and a 16-bit distinct-shingle count, 120 bytes, of the newest version, SKETCH_VERSION.
DEFAULT_SKETCH_BINS = 944
DEFAULT_SKETCH_BITS = 1
DEFAULT_SKETCH_SIZE_BITS = 16
SKETCH_VERSION = 2
# A scheme is refused past this many bins (a sketch of 128 KiB at 16 bits): the default has 944, and a
# tampered count would otherwise size every array made from it (a MemoryError at 2e9).
MAX_BINS = 65536
