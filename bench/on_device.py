"""Run one of our own scripts with DEVICE as torch's default device (bench/watch_quality.py --device):

    python bench/on_device.py DEVICE SCRIPT [ARGS...]

as `python SCRIPT ARGS` would run it, inside watch_quality's default-device mode. watch_quality
starts it under `kb watch` in a process of its own per script: a CUDA device-side assert (a
label out of range, say) ends the CUDA context of the process it happens in."""
from __future__ import annotations

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    device, script, *args = sys.argv[1:]
    sys.path.insert(0, HERE)
    from watch_quality import default_device
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    with default_device(device):
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
