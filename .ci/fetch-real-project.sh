#!/usr/bin/env bash
# The real project of TESTING.md §1.8: the idna 3.10 sdist, downloaded once into .cache/real-project/,
# checked against its sha256 and unpacked to .cache/real-project/idna-3.10/. Idempotent: a cache whose
# checksum matches is kept; tests only read it.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=.cache/real-project
SDIST=$DIR/idna-3.10.tar.gz
SHA256=12f65c9b470abda6dc35cf8e63cc574b1c52b11df2c86030af0ac09b01b13ea9
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
mkdir -p "$DIR"
ok() { [ -f "$SDIST" ] && echo "$SHA256  $SDIST" | sha256sum --check --status; }
if ! ok; then
  rm -f "$SDIST"
  "$PY" -m pip download -q --no-deps --no-binary :all: idna==3.10 -d "$DIR"
  if ! ok; then
    echo "fetch-real-project: $SDIST does not match sha256 $SHA256" >&2
    rm -f "$SDIST"
    exit 1
  fi
fi
if [ ! -f "$DIR/idna-3.10/.complete" ]; then
  rm -rf "$DIR/idna-3.10" "$DIR/.unpack"
  mkdir -p "$DIR/.unpack"
  tar -xzf "$SDIST" -C "$DIR/.unpack"
  mv "$DIR/.unpack/idna-3.10" "$DIR/idna-3.10"
  rmdir "$DIR/.unpack"
  touch "$DIR/idna-3.10/.complete"
fi
echo "fetch-real-project: $DIR/idna-3.10 ready"
