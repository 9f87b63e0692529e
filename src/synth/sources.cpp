#include "synth/sources.h"

#include <algorithm>
#include <filesystem>

#include "diffnet/common.h"
#include "diffnet/image_io.h"

namespace fs = std::filesystem;

namespace diffnet::synth {

std::vector<SourceFile> list_sources(const std::vector<std::string>& dirs) {
  std::vector<SourceFile> out;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dir, "not a directory");
    fs::path img_dir = dir, box_dir = dir;
    if (fs::is_directory(fs::path(dir) / "images", ec)) {
      img_dir = fs::path(dir) / "images";
      box_dir = fs::is_directory(fs::path(dir) / "boxes", ec) ? fs::path(dir) / "boxes" : img_dir;
    }
    std::vector<SourceFile> found;
    for (auto& e : fs::directory_iterator(img_dir, ec)) {
      if (std::error_code ec2; !e.is_regular_file(ec2)) continue;
      std::string ext = file_extension(e.path().string());
      if (ext != ".jpg" && ext != ".jpeg" && ext != ".png") continue;
      SourceFile s;
      s.image = e.path().string();
      std::string stem = file_stem(s.image);
      for (auto cand : {box_dir / (stem + ".txt"), box_dir / (stem + ".boxes"), img_dir / (stem + ".txt")})
        if (std::error_code ec2; fs::is_regular_file(cand, ec2)) {
          s.boxes = cand.string();
          break;
        }
      found.push_back(std::move(s));
    }
    if (ec) throw Error(dir, "cannot list: " + ec.message());
    if (found.empty()) throw Error(img_dir.string(), "no .jpg/.jpeg/.png images");
    std::sort(found.begin(), found.end(), [](const SourceFile& a, const SourceFile& b) { return a.image < b.image; });
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

Page load_source(const SourceFile& src, nlohmann::json* info) {
  auto bytes = read_file(src.image);
  if (bytes.empty()) throw Error(src.image, "empty file");
  Page page;
  page.img = from_tensor(decode_image_bytes(bytes, src.image));
  if (page.img.w < kMinSourceSide || page.img.h < kMinSourceSide)
    throw Error(src.image, "too small (" + std::to_string(page.img.w) + "x" + std::to_string(page.img.h) +
                               ", need at least " + std::to_string(kMinSourceSide) + " px per side)");
  nlohmann::json j = {{"kind", "file"}, {"path", src.image}};
  bool jpeg = is_jpeg_bytes(bytes.data(), bytes.size());
  j["format"] = jpeg ? "jpeg" : "png";
  if (jpeg) {
    ImageInfo ii = read_image_info(src.image);
    j["quality"] = ii.quality_estimate;
  }
  if (!src.boxes.empty()) {
    page.words = read_box_file(src.boxes, page.img.w, page.img.h);
    std::vector<Word> kept;
    for (auto& w : page.words)
      if (w.box.w() >= 4 && w.box.h() >= 4) kept.push_back(std::move(w));
    page.words = std::move(kept);
    j["boxes"] = "file";
    j["box_file"] = src.boxes;
  }
  if (page.words.empty()) {
    page.words = detect_words(page.img);
    j["boxes"] = "detected";
  }
  if (static_cast<int>(page.words.size()) < kMinSourceWords)
    throw Error(src.image, "no text found (" + std::to_string(page.words.size()) + " word boxes)");
  page.degraded = true;
  *info = j;
  return page;
}

}  // namespace diffnet::synth
