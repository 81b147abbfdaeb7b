"""simq's quick lane: `simq hash TEXT` and `simq near --key KEY` (or a text) answered without typer, rich or
numpy, where the answer and every byte printed are the same as the full command line's (lane.py; words.py:
the words and plain text both print). Anything else goes to cli/ (bench/startup.py)."""
