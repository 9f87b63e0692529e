// PredictionWriter: maps and records of predict and eval (include/diffnet/prediction_writer.h).
#include "diffnet/prediction_writer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diffnet/common.h"
#include "diffnet/image_io.h"

namespace diffnet {
namespace {

// The exact input name a record describes ("" when the line is not a record).
std::string record_key(const nlohmann::json& j) {
  if (!j.is_object()) return "";
  if (auto h = j.find("file_hex"); h != j.end() && h->is_string()) {
    try {
      return from_hex(h->get<std::string>());
    } catch (const Error&) {
      return "";
    }
  }
  if (auto f = j.find("file"); f != j.end() && f->is_string()) return f->get<std::string>();
  return "";
}

}  // namespace

PredictionWriter::PredictionWriter(std::string dir, PredictionWriterOptions options)
    : dir_(std::move(dir)), jsonl_(dir_ + "/predictions.jsonl"), opt_(std::move(options)) {
  make_dirs(dir_);
  last_flush_ = now_seconds();
  std::error_code ec;
  if (opt_.fresh || !std::filesystem::exists(jsonl_, ec)) {
    dirty_ = true;  // a fresh run starts with an empty file even if it writes nothing
    return;
  }
  std::ifstream in(jsonl_);
  if (!in) throw Error(jsonl_, "cannot read");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string key = j.is_discarded() ? "" : record_key(j);
    if (!key.empty()) {
      if (auto it = index_.find(key); it != index_.end()) {  // a duplicate left by an older version
        lines_[it->second] = line;
        continue;
      }
      index_[key] = lines_.size();
    }
    lines_.push_back(line);
  }
}

PredictionWriter::~PredictionWriter() {
  try {
    flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
}

std::string PredictionWriter::base_name(const std::string& file, int64_t page_number) {
  // Page 3 of "dir/x.pdf" is "x-p3"; a clash falls back to "x.pdf-p3", then numbers.
  const std::string page = page_number > 0 ? "-p" + std::to_string(page_number) : "";
  std::string base = file_stem(file) + page;
  if (used_bases_.count(base)) base = std::filesystem::path(file).filename().string() + page;
  std::string candidate = base;
  for (int i = 2; used_bases_.count(candidate); ++i) candidate = base + "_" + std::to_string(i);
  used_bases_.insert(candidate);
  return candidate;
}

nlohmann::json PredictionWriter::write(const Prediction& p, nlohmann::json record, const std::string& base,
                                       const at::Tensor& prob_u8, const at::Tensor& overlay_rgb) {
  const std::string prefix = dir_ + "/" + base;
  const std::string prob = prefix + ".prob.png", overlay = prefix + ".overlay.png";
  write_png(prob, prob_u8.defined() ? prob_u8 : prob_to_u8(p.prob));
  record["outputs"] = {{"prob", valid_utf8(prob)}};
  if (opt_.overlays) {
    try {
      write_png(overlay, overlay_rgb.defined() ? overlay_rgb : render_overlay(p.rgb, p.prob, p.regions, opt_.overlay));
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove(prob, ec);
      throw;
    }
    record["outputs"]["overlay"] = valid_utf8(overlay);
  }
  const std::string key = record_key(record);
  std::string line = record.dump();
  if (auto it = index_.find(key); !key.empty() && it != index_.end()) {
    lines_[it->second] = std::move(line);
  } else {
    if (!key.empty()) index_[key] = lines_.size();
    lines_.push_back(std::move(line));
  }
  dirty_ = true;
  if (now_seconds() - last_flush_ >= opt_.flush_interval_s) flush();
  return record;
}

void PredictionWriter::flush() {
  if (!dirty_) return;
  std::string text;
  for (const std::string& l : lines_) text += l + "\n";
  write_file_atomic(jsonl_, text.data(), text.size());
  dirty_ = false;
  last_flush_ = now_seconds();
}

}  // namespace diffnet
