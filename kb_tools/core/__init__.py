"""The bottom layer: errors and file helpers, the data model and its schema, where a KB is, its
caches and its loader. Imports nothing else of kb_tools (tests/test_layers.py)."""
