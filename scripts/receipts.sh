# Shell functions shared by make-val.sh and make-train.sh (sourced, not run).

# link_receipt SRC ID DIR: DIR/images/ID.jpg and DIR/boxes/ID.txt become links to the scan and the word
# boxes of receipt ID in SRC (SRC/images/ID.jpg, SRC/boxes/ID.txt): a `diffnet synth --sources` folder.
link_receipt() {
  ln -s "$(realpath "$1/images/$2.jpg")" "$3/images/$2.jpg"
  ln -s "$(realpath "$1/boxes/$2.txt")" "$3/boxes/$2.txt"
}
