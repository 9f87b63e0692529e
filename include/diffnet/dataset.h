// Dataset sources (docs/design.md §4.5): images/ + masks/ folders, DocTamper LMDB, list files; items load lazily.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <cstddef>
#include <string>
#include <vector>

#include "diffnet/image_io.h"

namespace diffnet {

// One sample's location. Exactly one of (image_path) or (lmdb_path, lmdb_index) is set.
struct DatasetItem {
  std::string id;          // unique within the dataset: file stem, or "image-%09d" for LMDB
  std::string image_path;  // file-based sources
  std::string mask_path;   // empty: pristine (all-zero mask)
  std::string lmdb_path;   // LMDB directory
  int64_t lmdb_index = -1; // record number in the keys (0-based; 1-based LMDBs are detected and kept)
};

// A loaded item. mask is uint8 (H, W) in {0, 1} (any non-zero stored value = tampered).
struct LoadedItem {
  std::string id;
  at::Tensor rgb;                    // uint8 (H, W, 3)
  at::Tensor mask;                   // uint8 (H, W) 0/1
  std::vector<uint8_t> image_bytes;  // the encoded image as stored (for JPEG DCT from the file)
  bool is_jpeg = false;
  // Ground truth at page level: any tampered pixel (no mask: pristine).
  bool tampered() const { return mask.defined() && mask.ne(0).any().item<bool>(); }
};

// Lists a dataset given as:
//   DIR with images/ (and optional masks/): mask = masks/<stem>.png; no mask = pristine;
//   DIR holding an LMDB (data.mdb) in DocTamper layout (num-samples, image-%09d, label-%09d);
//   FILE.txt/.lst: one "image_path[ mask_path]" per line (relative paths are relative to the file).
// Throws Error naming the path for unreadable/empty sources.
std::vector<DatasetItem> list_dataset(const std::string& spec);

// The items of a list file from its content (what list_dataset does for FILE.txt/.lst; path names the
// file in errors and anchors relative paths). Throws Error("path:line", ...) for a malformed line.
std::vector<DatasetItem> parse_list_file(const std::string& content, const std::string& path);

// Decodes a stored item from its bytes as load_item does (an LMDB record pair image-%09d / label-%09d,
// or the files' contents): image via decode_image_bytes(opt), mask (when mask_bytes is non-null) via
// decode_mask_bytes, mask size == image size. Throws Error naming name / mask_name.
LoadedItem decode_item_bytes(std::vector<uint8_t> image_bytes, const std::vector<uint8_t>* mask_bytes,
                             const std::string& name, const std::string& mask_name, const DecodeOptions& opt = {});

// Decodes one item; validates mask size == image size (Error naming the files otherwise).
LoadedItem load_item(const DatasetItem& item);

// Cheap up-front validation from file headers (no full decode): every image and mask is readable as
// JPEG/PNG and each mask has its image's size; LMDB records must exist. Throws Error naming the first
// bad file. progress: print a progress line on stderr for long lists.
void validate_dataset(const std::vector<DatasetItem>& items, bool progress = false);

// Raw bytes of an LMDB record by key (read-only environment, cached per path, safe from any thread);
// at most max_bytes are copied. Returns false when the key does not exist; throws Error naming the
// LMDB for other failures.
bool lmdb_get(const std::string& lmdb_path, const std::string& key, std::vector<uint8_t>& out,
              size_t max_bytes = SIZE_MAX);

}  // namespace diffnet
