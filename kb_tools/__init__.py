"""kb_tools: load, check, search, verify and publish a knowledge base for debugging PyTorch training."""

import os

__version__ = "0.1.0"
# The package's own folder: the bundled KB (_data/), the embeddings and the site templates are found from it.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
