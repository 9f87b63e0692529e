// Dataset list files (FILE.txt / .lst, "image_path[ mask_path]" per line): parse_list_file, the parser
// behind list_dataset, on the input as the file's content.
#include "diffnet/dataset.h"
#include "fuzz/fuzz_target.h"

DIFFNET_FUZZ_TARGET(list_file) {
  const std::string content(reinterpret_cast<const char*>(data), size);
  std::vector<diffnet::DatasetItem> items = diffnet::parse_list_file(content, "/lists/train.txt");
  for (const auto& it : items)
    if (it.image_path.empty() || it.id.empty() || !it.lmdb_path.empty()) __builtin_trap();
}
