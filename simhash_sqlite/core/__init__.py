"""The pure core: text to features, fingerprints, shingles and sketches. No SQLite, no files.

Everything here is a function of its arguments (the worker pool in pool.py only runs these functions
in other processes), so the same text gives the same fingerprint on every machine and in every process.
"""
