"""Entry point: `python sift.py …` is the same as the `sift` console script."""

import sys

from siftlib.cli import run

if __name__ == "__main__":
    sys.exit(run())
