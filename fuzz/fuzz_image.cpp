// Image decoding as the CLI and the service do it (decode_image_bytes with the warnings collected, the
// header read, EXIF orientation applied), JPEG and PNG alike, under a 4 MP limit; and the mask decoder
// (decode_mask_bytes, no limit of its own: only inputs whose header passed the 4 MP check reach it).
#include "diffnet/image_io.h"
#include "fuzz/fuzz_target.h"

DIFFNET_FUZZ_TARGET(image) {
  const std::vector<uint8_t> bytes(data, data + size);
  diffnet::DecodeOptions opt;
  opt.max_pixels = 4'000'000;
  const diffnet::ImageInfo info = diffnet::read_image_info_bytes(bytes, "fuzz", opt);
  std::vector<std::string> warnings;
  opt.warnings = &warnings;
  opt.apply_exif_orientation = info.exif_orientation != 1;
  at::Tensor rgb = diffnet::decode_image_bytes(bytes, "fuzz", opt);
  // The decoded size must agree with the header (orientation 5..8 swaps it).
  const bool swapped = opt.apply_exif_orientation && info.exif_orientation >= 5;
  const int64_t w = swapped ? info.height : info.width, h = swapped ? info.width : info.height;
  if (rgb.dim() != 3 || rgb.size(0) != h || rgb.size(1) != w || rgb.size(2) != 3 || !rgb.is_contiguous())
    __builtin_trap();
  at::Tensor mask = diffnet::decode_mask_bytes(bytes, "fuzz-mask");
  if (mask.dim() != 2 || mask.size(0) != info.height || mask.size(1) != info.width) __builtin_trap();
}
