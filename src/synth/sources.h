// Source pages from the user's folders: listing, loading (decode + boxes or word detection) and
// the reasons a source is unusable.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "synth/ops.h"

namespace diffnet::synth {

struct SourceFile {
  std::string image;  // path of a .jpg/.jpeg/.png file
  std::string boxes;  // its box file, or empty (words are then detected)
};

// Lists DIR/*.{jpg,jpeg,png} (or DIR/images/* with boxes in DIR/boxes/ when DIR has an images/
// folder); a box file is <stem>.txt or <stem>.boxes beside the image (or in boxes/). Sorted by path.
// Throws Error when a folder is missing or holds no image.
std::vector<SourceFile> list_sources(const std::vector<std::string>& dirs);

// Minimum page side and word count of a usable source.
constexpr int kMinSourceSide = 64;
constexpr int kMinSourceWords = 3;

// Decodes the image and reads or detects its words. Throws Error(path, reason) for an unusable
// source: unreadable or corrupt file, smaller than kMinSourceSide, bad box file, no text found.
// *info receives {"kind":"file","path","boxes":"file"|"detected","format","quality"}.
Page load_source(const SourceFile& src, nlohmann::json* info);

}  // namespace diffnet::synth
