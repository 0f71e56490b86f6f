"""Write the IRDL of vtmlir's dialects to dialects/<name>.irdl.mlir (`vt`, `layout`, `lowbit`).

    python -m vtmlir.dialects.write_irdl [--check] [OUTPUT_DIR]

OUTPUT_DIR defaults to the repository's dialects/ folder. With --check nothing is written; the exit
status is 1 when a checked-in file differs from the Python definitions.
"""

import argparse
import sys
from pathlib import Path

from . import ALL_DIALECTS, irdl_text

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_DIR = REPO_ROOT / "dialects"


def irdl_path(dialect, directory: Path = DEFAULT_DIR) -> Path:
    return Path(directory) / f"{dialect.DIALECT_NAMESPACE}.irdl.mlir"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vtmlir.dialects.write_irdl",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", nargs="?", default=str(DEFAULT_DIR))
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for dialect in ALL_DIALECTS:
        path = irdl_path(dialect, Path(args.output_dir))
        text = irdl_text(dialect)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    for path in stale:
        print(f"{path} is out of date; run: python -m vtmlir.dialects.write_irdl", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
