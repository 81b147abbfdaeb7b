"""Reports on an index for a person deciding: what each distance means here (calibrate) and why two
documents are or are not near-duplicates (explain). Built on SimhashIndex and the input readers."""
