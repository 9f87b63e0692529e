// Font catalogue and text rendering through Pango/Cairo (one engine per thread: Pango contexts are
// not shared between threads; Cairo font use is serialised, see text_mutex()). Sizes are absolute pixel sizes; hinting is off so glyph geometry
// scales linearly with the size and does not depend on the position.
#pragma once

#include <cairo.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "synth/raster.h"

namespace diffnet::synth {

enum class FontClass { Serif, Sans, Mono };
const char* font_class_name(FontClass c);

struct FontFace {
  std::string family;  // fontconfig family name
  FontClass cls;
};

// Every family the generator knows, by class (Debian packages in scripts/install-deps.sh).
const std::vector<FontFace>& font_catalogue();
// Resolves a selection ("serif", "sans", "mono", "all" or exact family names) to the installed
// families, in catalogue order. Throws Error when a named family is not installed or nothing is left.
std::vector<FontFace> select_fonts(const std::vector<std::string>& selection);
// True when fontconfig has this family.
bool font_installed(const std::string& family);

struct FontSpec {
  std::string family;
  bool bold = false;
  bool italic = false;
  double size_px = 12;
};

// Text geometry relative to the layout's top-left corner (px, unrounded).
struct TextExtents {
  double ink_x = 0, ink_y = 0, ink_w = 0, ink_h = 0;
  double advance = 0;   // logical width
  double baseline = 0;  // distance top -> baseline
  double height = 0;    // logical height
};

class TextEngine {
 public:
  TextEngine();
  ~TextEngine();
  TextEngine(const TextEngine&) = delete;
  TextEngine& operator=(const TextEngine&) = delete;

  TextExtents measure(const std::string& text, const FontSpec& font);
  // Draws text with its baseline's left end at (x, baseline) in the current cairo source colour.
  void draw(cairo_t* cr, const std::string& text, const FontSpec& font, double x, double baseline);
  // Coverage (1-channel, 0..255) of text drawn at (x, baseline) in page coordinates, cropped to the
  // ink box plus 2 px; *origin receives the page position of the raster's top-left pixel.
  Raster render_alpha(const std::string& text, const FontSpec& font, double x, double baseline, Box* origin);

 private:
  void set(const std::string& text, const FontSpec& font);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The calling thread's engine (created on first use).
TextEngine& text_engine();

// Cairo 1.16's FreeType font cache is not safe under concurrent use from several threads (a face
// evicted by one thread while another draws with it crashes), so every call that creates, uses or
// releases Cairo fonts holds this lock: TextEngine does; callers destroying a cairo_t that drew
// text must too.
std::recursive_mutex& text_mutex();

}  // namespace diffnet::synth
