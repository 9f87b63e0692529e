# Shell functions shared by make-val.sh, make-train.sh and make-probe.sh (sourced, not run).

# link_receipt SRC ID DIR: DIR/images/ID.jpg and DIR/boxes/ID.txt become links to the scan and the word
# boxes of receipt ID in SRC (SRC/images/ID.jpg, SRC/boxes/ID.txt): a `diffnet synth --sources` folder.
link_receipt() {
  ln -s "$(realpath "$1/images/$2.jpg")" "$3/images/$2.jpg"
  ln -s "$(realpath "$1/boxes/$2.txt")" "$3/boxes/$2.txt"
}

# zero_mask W,H FILE: an all-zero 8-bit grey PNG (so `diffnet score` also scores the untouched pages).
zero_mask() {
  python3 - "$1" "$2" <<'PY'
import struct, sys, zlib
w, h = map(int, sys.argv[1].split(","))
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
raw = b"".join(b"\0" + bytes(w) for _ in range(h))
open(sys.argv[2], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
PY
}

# take FROM DIR PREFIX: moves FROM's generated images and masks into DIR with PREFIX on their names.
take() {
  local from=$1 dir=$2 prefix=$3 f b
  for f in "$from"/images/*; do
    b=$(basename "$f")
    mv "$f" "$dir/images/$prefix$b"
    mv "$from/masks/${b%.*}.png" "$dir/masks/$prefix${b%.*}.png"
  done
}

# make_pages SRC LIST DIR SEED DIFFNET: the whole-page set of the receipts listed in LIST (one ID a line)
# as an `images/ + masks/` dataset in DIR (docs/eval.md, "Validation set"): u-ID (the untouched scan, its
# original bytes), r-N (each receipt re-saved once without an edit, through the edits' output pipeline),
# e-N (two edited versions of each receipt), manifest.jsonl and manifest-resaved.jsonl. DIR is
# .../receipts-NAME; the scratch folder .../.work-NAME beside it is removed at the end.
# Environment (a variant of the set; the defaults make the documented one):
#   PAGES_OPS     the edits' `synth --ops` (default text:2,insert:2,copy-move:1)
#   PAGES_OUTPUT  how r-N and e-N are saved, as `synth` options (default --output-format mixed --q2 75-95)
make_pages() {
  local src=$1 list=$2 dir=$3 seed=$4 diffnet=$5
  local name tmp
  name=$(basename "$dir")
  tmp=$(dirname "$dir")/.work-${name#receipts-}
  rm -rf "$dir" "$tmp"
  mkdir -p "$dir/images" "$dir/masks" "$tmp/src/images" "$tmp/src/boxes"
  local n=0
  while read -r id; do
    [ -n "$id" ] || continue
    cp "$src/images/$id.jpg" "$dir/images/u-$id.jpg"
    zero_mask "$(grep "^$id," "$src/index.csv" | cut -d, -f2,3)" "$dir/masks/u-$id.png"
    link_receipt "$src" "$id" "$tmp/src"
    n=$((n + 1))
  done < "$list"
  # Untouched but re-saved once, same output pipeline as the edits below.
  local output=${PAGES_OUTPUT:---output-format mixed --q2 75-95}
  # shellcheck disable=SC2086  # $output is a list of options
  "$diffnet" synth --out "$tmp/resaved" --count "$n" --seed "$((seed + 50))" --sources "$tmp/src" \
      --pristine-prob 1 --q1-prob 0 $output --quiet >/dev/null
  take "$tmp/resaved" "$dir" r-
  mv "$tmp/resaved/manifest.jsonl" "$dir/manifest-resaved.jsonl"
  # shellcheck disable=SC2086
  "$diffnet" synth --out "$tmp/synth" --count $((2 * n)) --seed "$seed" --sources "$tmp/src" \
      --ops "${PAGES_OPS:-text:2,insert:2,copy-move:1}" --max-edits 2 --pristine-prob 0 --q1-prob 0 \
      $output --quiet >/dev/null
  take "$tmp/synth" "$dir" e-
  mv "$tmp/synth/manifest.jsonl" "$dir/manifest.jsonl"
  rm -rf "$tmp"
  echo "$dir: $n untouched + $n re-saved untouched + $((2 * n)) edited pages"
}

# training_receipts SRC OUT: every receipt of SRC not held out (data/splits/receipts-val.txt) linked into
# OUT/receipts-src (a `synth --sources` folder), its original scan listed in OUT/real-untouched.txt and its
# ID in OUT/receipts-train.txt. Receipts listed in data/splits/receipts-edited-before-publication.txt (text
# typed onto the scan before it was published, docs/eval.md) are left out too: as untouched negatives or as
# sources of edits they would teach that such typing is part of a genuine page. Prints how many.
training_receipts() {
  local src=$1 out=$2 f id n=0 edited=0
  local prepublished=data/splits/receipts-edited-before-publication.txt
  [ -f "$prepublished" ] || { echo "training_receipts: $prepublished not found" >&2; return 2; }
  rm -rf "$out/receipts-src"
  mkdir -p "$out/receipts-src/images" "$out/receipts-src/boxes"
  : > "$out/real-untouched.txt"
  : > "$out/receipts-train.txt"
  for f in "$src"/images/*.jpg; do
    id=$(basename "$f" .jpg)
    if grep -qx "$id" data/splits/receipts-val.txt; then continue; fi
    if grep -qx "$id" "$prepublished"; then edited=$((edited + 1)); continue; fi
    link_receipt "$src" "$id" "$out/receipts-src"
    realpath "$f" >> "$out/real-untouched.txt"
    echo "$id" >> "$out/receipts-train.txt"
    n=$((n + 1))
  done
  echo "$n training receipts (held out: $(grep -c . data/splits/receipts-val.txt); left out as edited before publication: $edited)"
}

# outside_heldout_family SET: SET.txt beside the `diffnet synth` folder SET, a list file of its pages
# outside the synthetic held-out family (payslip and letter layouts in monospace fonts, docs/eval.md).
outside_heldout_family() {
  local set=$1 name
  name=$(basename "$set")
  grep -v -E '"font_class":"mono"[^}]*"layout":"(payslip|letter)"|"layout":"(payslip|letter)"[^}]*"font_class":"mono"' \
      "$set/manifest.jsonl" |
    sed -E "s#.*\"image\":\"([^\"]*)\".*\"mask\":\"([^\"]*)\".*#$name/\\1\t$name/\\2#" > "$set.txt"
  echo "$(grep -c . "$set.txt") of $(grep -c . "$set/manifest.jsonl") pages of $name outside the held-out family"
}

# Stops at once when the command is missing, naming the Debian package that has it.
need_command() {
  command -v "$1" >/dev/null || { echo "${0##*/}: $1 not found (Debian: apt install $2)" >&2; exit 2; }
}

# Stops at once, saying what to install, when python3 cannot import the modules (comma-separated, e.g.
# numpy,PIL): the steps that need them come after minutes of other work.
need_python_modules() {
  local py
  py=$(command -v python3) || { echo "${0##*/}: python3 not found (Debian: apt install python3)" >&2; exit 2; }
  python3 -c "import $1" 2>/dev/null ||
    { echo "${0##*/}: $py cannot import $1 (Debian: apt install python3-numpy python3-pil, for /usr/bin/python3)" >&2; exit 2; }
}
