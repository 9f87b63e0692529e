// Word boxes of a source page: reading box files (diffnet and SROIE formats) and finding words
// automatically (binarise + connected components grouped into words).
#pragma once

#include <string>
#include <vector>

#include "synth/raster.h"

namespace diffnet::synth {

// Text style of a word when it is known exactly (rendered pages).
struct WordStyle {
  bool known = false;
  std::string family;      // Pango family name, e.g. "DejaVu Serif"
  bool bold = false;
  bool italic = false;
  double size_px = 0;      // absolute font size in pixels
  Color color{0, 0, 0};    // ink colour as drawn
  double origin_x = 0;     // pen position of the layout's left edge (px)
  double baseline_y = 0;   // baseline (px)
};

struct Word {
  Box box;                 // tight ink box plus 1 px, half-open
  std::string text;        // empty when unknown (auto-detected)
  WordStyle style;
};

// Reads a box file. Formats (auto-detected per file, see docs/synth.md):
//  - diffnet: optional first line "# diffnet-boxes"; then "left,top,right,bottom[,TEXT]" per line,
//    right/bottom exclusive, TEXT = everything after the 4th comma;
//  - SROIE: "x1,y1,x2,y2,x3,y3,x4,y4,TEXT" (quad, clockwise from top-left; TEXT may hold commas);
//    the box is the quad's bounding rectangle with max corners inclusive.
// CRLF or LF; blank lines and '#' comments are ignored; boxes are clipped to (width, height) and
// empty ones dropped. Throws Error(path, reason) when the file cannot be read or a line is malformed.
std::vector<Word> read_box_file(const std::string& path, int width, int height);
// Parses box-file text (same rules); `name` is used in error messages.
std::vector<Word> parse_boxes(const std::string& text, const std::string& name, int width, int height);
// Writes words in the diffnet format (with the header line).
std::string format_boxes(const std::vector<Word>& words);

// Finds word boxes: Sauvola binarisation (window ~ 1/40 of the page, k 0.3), 8-connected components,
// noise/line/figure components dropped, components on one line with gaps <= gap_factor x the
// taller component's height merged.
std::vector<Word> detect_words(const Raster& rgb, double gap_factor = 0.4);

}  // namespace diffnet::synth
