#!/usr/bin/env bash
# Installs the Debian 12 packages DiffNet builds and runs with (--fuzz: also those of `make fuzz`). Idempotent; needs root (or sudo).
set -euo pipefail
PKGS=(
  cmake g++ make ninja-build pkg-config
  libtorch-dev libopenblas0-openmp libtcmalloc-minimal4
  libjpeg62-turbo-dev libpng-dev liblmdb-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libcairo2-dev libpango1.0-dev fonts-dejavu-core fonts-liberation2 fonts-noto-mono
  libgtest-dev python3 libgloo-dev python3-torch
  libqpdf-dev libpoppler-cpp-dev libtiff-dev dpkg-dev
  nodejs chromium-headless-shell pybind11-dev python3-numpy python3-pil
  fonts-freefont-ttf fonts-urw-base35 libjpeg-turbo-progs qemu-user
)
# `make fuzz` (scripts/install-deps.sh --fuzz): clang 14 and its runtimes (libFuzzer, ASan, UBSan).
if [ "${1:-}" = "--fuzz" ]; then
  PKGS+=(clang-14 libclang-rt-14-dev)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
