"""A stand-in for mpl_toolkits.mplot3d."""
from matplotlib import NULL as Axes3D  # noqa: F401
