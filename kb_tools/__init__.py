"""kb_tools: load, check, search, verify and publish a knowledge base for debugging PyTorch training."""

__version__ = "0.1.0"
