"""`sift blind RUN_DIR`: write the blind judging packs, the key and a blank judgments sheet.

Safe from cron: when the material exists it writes nothing, prints nothing and exits 0.
Exit codes: 0 written or already there, 2 the run directory is unusable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `sift blind`."""
    parser.epilog = (
        "example: sift blind runs/2026-11-30   (then judge runs/2026-11-30/packs/*.json)"
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", help="a finished `sift bakeoff run` directory"
    )


def run(args: argparse.Namespace) -> int:
    """Write the missing judging material; return the exit code."""
    from siftlib.bakeoff.blind import write_blind
    from siftlib.errors import BakeoffError

    run_dir = Path(args.run_dir)
    try:
        written = write_blind(run_dir)
    except (BakeoffError, OSError) as exc:
        print(f"sift blind: {exc}", file=sys.stderr)
        return 2
    if written:
        print(f"wrote {', '.join(str(p.relative_to(run_dir)) for p in written)} in {run_dir}")
        print("judge the packs, fill judgments.csv (1/0), and leave key/ closed until scoring")
    return 0
