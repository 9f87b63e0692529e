// Helpers of the io tests: reading the PPM/PGM references written by djpeg/ImageMagick, byte files,
// expected errors.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "diffnet/common.h"

namespace diffnet::testutil {

// A fixture of tests/data/io/.
std::string io(const std::string& file);

// Reads a binary PPM (P6) as uint8 (H, W, 3) or PGM (P5) as uint8 (H, W); maxval 255 only.
at::Tensor read_pnm(const std::string& path);

// Writes raw bytes to a new file under a temp dir and returns its path.
std::string write_temp_bytes(const std::string& tag, const std::string& name, const std::vector<uint8_t>& bytes);

// Expects f() to throw diffnet::Error with a one-line message naming `name` and containing `what`.
template <class F>
void expect_error(F&& f, const std::string& name, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "expected an error for " << name;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace diffnet::testutil
