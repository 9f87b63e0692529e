// Dataset listing (folders, DocTamper LMDB, list files), header validation and item loading.
#include "diffnet/dataset.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "diffnet/common.h"
#include "diffnet/image_io.h"

namespace diffnet {
namespace fs = std::filesystem;
namespace {

bool is_image_extension(const std::string& ext) { return ext == ".jpg" || ext == ".jpeg" || ext == ".png"; }

std::string lmdb_key(const char* prefix, int64_t index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%09lld", prefix, static_cast<long long>(index));
  return buf;
}

std::string item_name(const DatasetItem& item) {
  if (!item.lmdb_path.empty()) return item.lmdb_path + "[" + lmdb_key("image", item.lmdb_index) + "]";
  return item.image_path;
}

std::vector<DatasetItem> list_folder(const std::string& dir) {
  fs::path images = fs::path(dir) / "images", masks = fs::path(dir) / "masks";
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(images, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    if (is_image_extension(file_extension(entry.path().string()))) files.push_back(entry.path().string());
  }
  if (ec) throw Error(images.string(), "cannot list directory: " + ec.message());
  std::sort(files.begin(), files.end());
  bool has_masks = fs::is_directory(masks, ec);
  std::vector<DatasetItem> items;
  std::map<std::string, std::string> seen;
  for (const auto& f : files) {
    DatasetItem it;
    it.id = file_stem(f);
    auto [pos, inserted] = seen.emplace(it.id, f);
    if (!inserted) throw Error(f, "duplicate image stem (also " + pos->second + "): masks would be ambiguous");
    it.image_path = f;
    if (has_masks) {
      fs::path m = masks / (it.id + ".png");
      if (fs::is_regular_file(m, ec)) it.mask_path = m.string();
    }
    items.push_back(std::move(it));
  }
  return items;
}

std::vector<DatasetItem> list_lmdb(const std::string& path) {
  std::vector<uint8_t> bytes;
  if (!lmdb_get(path, "num-samples", bytes)) throw Error(path, "LMDB has no 'num-samples' key (DocTamper layout expected)");
  std::string text(bytes.begin(), bytes.end());
  long long n = -1;
  try {
    size_t used = 0;
    n = std::stoll(text, &used);
  } catch (...) {
    n = -1;
  }
  if (n < 0) throw Error(path, "LMDB 'num-samples' is not a number: '" + text.substr(0, 32) + "'");
  // DocTamper numbers records from 0; accept 1-based stores too (detected from the first key).
  int64_t base = 0;
  if (n > 0 && !lmdb_get(path, lmdb_key("image", 0), bytes, 16)) {
    if (lmdb_get(path, lmdb_key("image", 1), bytes, 16))
      base = 1;
    else
      throw Error(path, "LMDB has neither image-000000000 nor image-000000001");
  }
  std::vector<DatasetItem> items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    DatasetItem it;
    it.lmdb_path = path;
    it.lmdb_index = base + i;
    it.id = lmdb_key("image", base + i);
    items.push_back(std::move(it));
  }
  return items;
}

std::vector<DatasetItem> list_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path, "cannot open list file");
  std::stringstream content;
  content << in.rdbuf();
  return parse_list_file(content.str(), path);
}

}  // namespace

std::vector<DatasetItem> parse_list_file(const std::string& content, const std::string& path) {
  std::istringstream in(content);
  fs::path base = fs::path(path).parent_path();
  auto resolve = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (base / p).string(); };
  std::vector<DatasetItem> items;
  std::set<std::string> ids;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::vector<std::string> fields;
    if (line.find('\t') != std::string::npos) {  // tab-separated: paths may contain spaces
      std::stringstream ss(line);
      std::string f;
      while (std::getline(ss, f, '\t'))
        if (!f.empty()) fields.push_back(f);
    } else {
      std::stringstream ss(line);
      std::string f;
      while (ss >> f) fields.push_back(f);
    }
    if (fields.empty() || fields.size() > 2)
      throw Error(path + ":" + std::to_string(lineno), "expected 'image_path [mask_path]'");
    DatasetItem it;
    it.image_path = resolve(fields[0]);
    if (fields.size() == 2) it.mask_path = resolve(fields[1]);
    it.id = file_stem(it.image_path);
    if (it.id.empty())  // "dir/": no file name, and no id for the outputs named after it (found by fuzz_list_file)
      throw Error(path + ":" + std::to_string(lineno), "'" + fields[0] + "' is not a file name");
    if (!ids.insert(it.id).second) it.id += "_" + std::to_string(lineno);
    ids.insert(it.id);
    items.push_back(std::move(it));
  }
  return items;
}

std::vector<DatasetItem> list_dataset(const std::string& spec) {
  std::error_code ec;
  if (!fs::exists(spec, ec)) throw Error(spec, "dataset not found");
  std::vector<DatasetItem> items;
  if (fs::is_directory(spec, ec)) {
    if (fs::is_directory(fs::path(spec) / "images", ec))
      items = list_folder(spec);
    else if (fs::is_regular_file(fs::path(spec) / "data.mdb", ec))
      items = list_lmdb(spec);
    else
      throw Error(spec, "not a dataset: expected an images/ (+ masks/) folder or an LMDB (data.mdb)");
  } else {
    std::string ext = file_extension(spec);
    if (ext == ".mdb")
      items = list_lmdb(spec);
    else
      items = list_file(spec);
  }
  if (items.empty()) throw Error(spec, "empty dataset (no .jpg/.jpeg/.png images found)");
  return items;
}

void validate_dataset(const std::vector<DatasetItem>& items, bool progress) {
  Progress bar("validate", static_cast<int64_t>(items.size()), !progress || items.size() < 2000);
  std::vector<uint8_t> bytes;
  for (const auto& item : items) {
    if (!item.lmdb_path.empty()) {
      if (!lmdb_get(item.lmdb_path, lmdb_key("image", item.lmdb_index), bytes, 16))
        throw Error(item_name(item), "record missing");
      if (!is_jpeg_bytes(bytes.data(), bytes.size()) && !is_png_bytes(bytes.data(), bytes.size()))
        throw Error(item_name(item), "record is neither JPEG nor PNG");
    } else {
      ImageInfo info = read_image_info(item.image_path);
      if (!item.mask_path.empty()) {
        ImageInfo m = read_image_info(item.mask_path);
        if (m.width != info.width || m.height != info.height)
          throw Error(item.mask_path, "mask size " + std::to_string(m.width) + "x" + std::to_string(m.height) +
                                          " differs from image " + item.image_path + " size " +
                                          std::to_string(info.width) + "x" + std::to_string(info.height));
      }
    }
    bar.step();
  }
  bar.finish();
}

LoadedItem decode_item_bytes(std::vector<uint8_t> image_bytes, const std::vector<uint8_t>* mask_bytes,
                             const std::string& name, const std::string& mask_name, const DecodeOptions& opt) {
  LoadedItem r;
  r.image_bytes = std::move(image_bytes);
  at::Tensor mask;
  if (mask_bytes) mask = decode_mask_bytes(*mask_bytes, mask_name);
  r.is_jpeg = is_jpeg_bytes(r.image_bytes.data(), r.image_bytes.size());
  r.rgb = decode_image_bytes(r.image_bytes, name, opt);
  int64_t h = r.rgb.size(0), w = r.rgb.size(1);
  if (mask.defined()) {
    if (mask.dim() == 3) mask = mask.select(2, 0);
    if (mask.size(0) != h || mask.size(1) != w)
      throw Error(mask_name, "mask size " + std::to_string(mask.size(1)) + "x" + std::to_string(mask.size(0)) +
                                 " differs from image " + name + " size " + std::to_string(w) + "x" +
                                 std::to_string(h));
    r.mask = mask.ne(0).to(at::kByte).contiguous();
  } else {
    r.mask = at::zeros({h, w}, at::kByte);
  }
  return r;
}

LoadedItem load_item(const DatasetItem& item) {
  const std::string name = item_name(item);
  std::vector<uint8_t> image, mask;
  std::string mask_name;
  bool has_mask = false;
  if (!item.lmdb_path.empty()) {
    if (!lmdb_get(item.lmdb_path, lmdb_key("image", item.lmdb_index), image)) throw Error(name, "record missing");
    mask_name = item.lmdb_path + "[" + lmdb_key("label", item.lmdb_index) + "]";
    has_mask = lmdb_get(item.lmdb_path, lmdb_key("label", item.lmdb_index), mask);
  } else {
    image = read_file(item.image_path);
    if (!item.mask_path.empty()) {
      mask_name = item.mask_path;
      mask = read_file(item.mask_path);
      has_mask = true;
    }
  }
  LoadedItem r = decode_item_bytes(std::move(image), has_mask ? &mask : nullptr, name, mask_name);
  r.id = item.id;
  return r;
}

}  // namespace diffnet
