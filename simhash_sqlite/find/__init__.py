"""Finding near-duplicates in an index: search by fingerprint blocks, all pairs, candidates from
sketches, the Jaccard check that confirms them, clusters, calibration and explanations.
Builds on core/ and store/."""
