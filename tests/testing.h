// Shared test helpers: paths, temp dirs, running the CLI, float64 comparisons.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace diffnet::testutil {

// Absolute path of a file under tests/data.
std::string data_path(const std::string& rel);
// Absolute path under the source tree.
std::string source_path(const std::string& rel);
// A fresh empty directory under the build's temp area, unique per call; removed at process exit.
std::string temp_dir(const std::string& tag);

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs a shell command line with stdout and stderr captured (exit_code -1 when a signal ended it).
CliResult run_command(const std::string& command);
// Runs the built diffnet CLI with the given argument string (shell-quoted by the caller).
CliResult run_cli(const std::string& args);

// max |a - b| over all elements (both copied to the CPU as double; they may live on different devices).
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);

// A minimal big-endian TIFF/EXIF payload holding only the Orientation tag (EXIF 2.3, tag 0x0112).
std::vector<uint8_t> exif_payload(int orientation);
// The JPEG bytes with an APP1 Exif segment holding that payload inserted right after SOI.
std::vector<uint8_t> jpeg_with_orientation(const std::vector<uint8_t>& jpeg, int orientation);

}  // namespace diffnet::testutil
