"""A stand-in for matplotlib.pyplot that draws nothing and never blocks."""
from matplotlib import NULL


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return NULL
