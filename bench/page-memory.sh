#!/usr/bin/env bash
# Peak memory (RSS) and time of `predict` on one big page: an A4 letter rendered at 600 dpi
# (4961 x 7016, 35 MP, JPEG), with the maps and overlay written (--out). Give several binaries to compare
# them in one run (e.g. a build of an older commit first).
#
#   bench/page-memory.sh [DIFFNET...]      default build/diffnet; needs /usr/bin/time (Debian package time)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/bin/time ] || { echo "page-memory: /usr/bin/time not found (apt install time)" >&2; exit 2; }
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(build/diffnet)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${BINS[0]}" synth --out "$tmp/page" --count 1 --seed 5 --dpi 600 --layouts letter --output-format jpeg \
    --pristine-prob 1 --quiet >/dev/null
page=$(ls "$tmp"/page/images/*.jpg)
echo "page: $("${BINS[0]}" inspect "$page" | head -1)"
for b in "${BINS[@]}"; do
  /usr/bin/time -f "%M %e" -o "$tmp/time" "$b" predict "$page" --out "$tmp/out" --json -q > "$tmp/record.json"
  read -r kb secs < "$tmp/time"
  printf '%-40s peak RSS %7.0f MB   %6.1f s   image_score %s\n' "$b" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "$secs" \
      "$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["image_score"], 4))' "$tmp/record.json")"
done
