"""The dense side's sentence embedders: one module per embedder."""
