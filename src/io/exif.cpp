// EXIF orientation: parsing the TIFF structure of an EXIF payload, and applying it to pixels.
#include <cstring>

#include "io/codec.h"

namespace diffnet::io_detail {

int exif_orientation(const uint8_t* data, size_t size) {
  if (size >= 6 && std::memcmp(data, "Exif\0\0", 6) == 0) data += 6, size -= 6;
  if (size < 8) return 1;
  bool le;
  if (data[0] == 'I' && data[1] == 'I') le = true;
  else if (data[0] == 'M' && data[1] == 'M') le = false;
  else return 1;
  auto u16 = [&](size_t off) -> uint32_t {
    return le ? (data[off] | (data[off + 1] << 8)) : ((data[off] << 8) | data[off + 1]);
  };
  auto u32 = [&](size_t off) -> uint32_t {
    return le ? (data[off] | (data[off + 1] << 8) | (data[off + 2] << 16) | (static_cast<uint32_t>(data[off + 3]) << 24))
              : ((static_cast<uint32_t>(data[off]) << 24) | (data[off + 1] << 16) | (data[off + 2] << 8) | data[off + 3]);
  };
  if (u16(2) != 42) return 1;
  const size_t ifd = u32(4);
  if (ifd > size - 2) return 1;
  const size_t count = u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    const size_t e = ifd + 2 + 12 * i;
    if (e + 12 > size) return 1;
    if (u16(e) != 0x0112) continue;
    const uint32_t type = u16(e + 2);
    uint32_t v = 0;
    if (type == 3) v = u16(e + 8);        // SHORT
    else if (type == 4) v = u32(e + 8);   // LONG (non-standard but seen)
    else return 1;
    return (v >= 1 && v <= 8) ? static_cast<int>(v) : 1;
  }
  return 1;
}

at::Tensor apply_orientation(const at::Tensor& hwc, int o) {
  switch (o) {
    case 2: return hwc.flip({1}).contiguous();                      // mirror horizontal
    case 3: return hwc.flip({0, 1}).contiguous();                   // rotate 180
    case 4: return hwc.flip({0}).contiguous();                      // mirror vertical
    case 5: return hwc.transpose(0, 1).contiguous();                // transpose
    case 6: return hwc.transpose(0, 1).flip({1}).contiguous();      // rotate 90 clockwise
    case 7: return hwc.transpose(0, 1).flip({0, 1}).contiguous();   // transverse
    case 8: return hwc.transpose(0, 1).flip({0}).contiguous();      // rotate 90 counter-clockwise
    default: return hwc;
  }
}

}  // namespace diffnet::io_detail
