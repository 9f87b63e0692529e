// DocTamper LMDB records: decode_item_bytes on an image-%09d value and, after the separator
// "--label--", a label-%09d value (the mask), as load_item decodes them. LMDB itself is not fuzzed.
// The image is decoded under a 4 MP limit; masks have none in the library (training data is trusted),
// so the target skips labels whose header says more than 4 MP.
#include "diffnet/dataset.h"
#include "fuzz/fuzz_target.h"

DIFFNET_FUZZ_TARGET(lmdb_record) {
  std::vector<std::string> fields = diffnet::fuzz::split(data, size, "--label--");
  diffnet::DecodeOptions opt;
  opt.max_pixels = 4'000'000;
  std::vector<uint8_t> label;
  const bool has_label = fields.size() >= 2;
  if (has_label) {
    label = diffnet::fuzz::bytes_of(fields[1]);
    diffnet::read_image_info_bytes(label, "label", opt);  // throws: no decode of oversized or broken headers
  }
  diffnet::LoadedItem item = diffnet::decode_item_bytes(diffnet::fuzz::bytes_of(fields[0]), has_label ? &label : nullptr,
                                                        "db[image-000000000]", "db[label-000000000]", opt);
  if (item.mask.sizes() != item.rgb.sizes().slice(0, 2)) __builtin_trap();
  item.tampered();
}
