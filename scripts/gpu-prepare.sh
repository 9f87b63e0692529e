#!/usr/bin/env bash
# Prepares, on the Debian build machine, what scripts/gpu-check.sh needs on a GPU machine that has
# PyTorch (with its LibTorch) but no network and no Debian -dev packages:
#   .gpu/debs/  libjpeg-turbo, libpng, zlib, LMDB, nlohmann-json, CLI11, GoogleTest/GoogleMock .deb files
#               (unpacked there into .gpu/prefix by gpu-check.sh; nothing is installed system-wide);
#   .gpu/data/  a small generated training set (images/ + masks/) for the GPU training check.
# .gpu/ is git-ignored: pass it to the GPU machine with the working tree (e.g. device `carry: [".gpu"]`).
# Usage: scripts/gpu-prepare.sh [BUILD_DIR]   (BUILD_DIR holds a built diffnet; default build)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
mkdir -p "$ROOT/.gpu/debs"
cd "$ROOT/.gpu/debs"
PKGS=(libjpeg62-turbo libjpeg62-turbo-dev libpng16-16 libpng-dev zlib1g-dev liblmdb0 liblmdb-dev
      nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev)
have=1
for p in "${PKGS[@]}"; do ls "${p}"_*.deb >/dev/null 2>&1 || have=0; done
if [ $have -eq 0 ]; then
  apt-get download "${PKGS[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
fi
ls -la "$ROOT/.gpu/debs"
if [ ! -d "$ROOT/.gpu/data/images" ]; then
  [ -x "$BUILD/diffnet" ] || { echo "gpu-prepare: $BUILD/diffnet not built (make build)"; exit 1; }
  # 400 crops of 256x256 from rendered pages, every tampering operation, seed 6060 (not a training or
  # evaluation seed of the shipped model).
  "$BUILD/diffnet" -t 2 synth --out "$ROOT/.gpu/data" --count 400 --seed 6060 --crop 256 --quiet
fi
du -sh "$ROOT/.gpu"
