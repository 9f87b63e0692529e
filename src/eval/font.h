// A 5x7 bitmap font (upper-case letters, digits, a little punctuation) for labels drawn into images:
// overlay legends and region labels, the reliability diagram. Glyphs drawn for this project.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace diffnet::font {

constexpr int kGlyphW = 5, kGlyphH = 7, kAdvance = 6;  // advance: glyph + 1 column of space

// Width in pixels of `text` at integer `scale` (no trailing space column).
int64_t text_width(const std::string& text, int scale);

// Draws `text` with its top-left corner at (x, y) into an RGB uint8 buffer (H, W, 3), row-major,
// clipped to the image. Lower-case letters are drawn as upper case; unknown characters as a space.
void draw_text(uint8_t* rgb, int64_t H, int64_t W, int64_t x, int64_t y, const std::string& text, int scale,
               std::array<uint8_t, 3> colour);

// Fills the rectangle [x0, x1) x [y0, y1) (clipped).
void fill_rect(uint8_t* rgb, int64_t H, int64_t W, int64_t x0, int64_t y0, int64_t x1, int64_t y1,
               std::array<uint8_t, 3> colour);

}  // namespace diffnet::font
