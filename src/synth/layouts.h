// Rendered source documents: receipts, invoices, payslips, bank statements, forms and letters laid out
// with Cairo/Pango at a given dpi, with their word boxes and exact text styles.
#pragma once

#include <string>
#include <vector>

#include "synth/boxes.h"
#include "synth/rng.h"
#include "synth/text.h"

namespace diffnet::synth {

enum class LayoutKind { Receipt, Invoice, Payslip, Statement, Form, Letter };
const std::vector<std::string>& layout_names();  // "receipt", "invoice", ...
LayoutKind parse_layout(const std::string& name);  // throws Error for unknown names
const char* layout_name(LayoutKind k);

struct RenderedPage {
  Raster image;             // RGB
  std::vector<Word> words;  // every drawn word, style known
};

// Renders one document of the given kind in the given font family at dpi (A4 pages are
// 210 x 297 mm; receipts 58-80 mm wide and as long as their content).
RenderedPage render_document(LayoutKind kind, const FontFace& font, double dpi, Rng& rng);

// A small "other document" for splicing: rows of words (the given texts first, then filler) in
// `font` at about size_px, on its own paper colour and ink. Width/height in px.
RenderedPage render_word_sheet(const std::vector<std::string>& texts, const FontFace& font, double size_px,
                               int width, int height, Rng& rng);

}  // namespace diffnet::synth
