"""`kb verify` and `kb evidence`: quotes checked against their cached sources, and sources cached with provenance."""
