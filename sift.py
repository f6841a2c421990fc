"""Entry point: `python sift.py …` is the same as the `sift` console script."""

import sys

from siftlib.cli import main

if __name__ == "__main__":
    sys.exit(main())
