// Helpers of the io tests: reading the PPM/PGM references written by djpeg/ImageMagick, byte files.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace diffnet::testutil {

// Reads a binary PPM (P6) as uint8 (H, W, 3) or PGM (P5) as uint8 (H, W); maxval 255 only.
at::Tensor read_pnm(const std::string& path);

// Writes raw bytes to a new file under a temp dir and returns its path.
std::string write_temp_bytes(const std::string& tag, const std::string& name, const std::vector<uint8_t>& bytes);

}  // namespace diffnet::testutil
