// POST /predict up to inference (parse_predict_request): picking the upload from the body or the
// multipart parts, its name, ?maps, and the header read under the pixel limit. Input layout, fields cut at
// "|#|": flags (byte 0: bit 0 multipart, bit 1 ?name= given, bit 2 ?maps= given, bit 3 ?report= and bit 4
// ?downscale= given with the same value), name, maps, body, then
// (name, filename, content) triples of multipart parts. Multipart parsing itself is cpp-httplib's.
#include "fuzz/fuzz_target.h"
#include "serve/request.h"

DIFFNET_FUZZ_TARGET(serve_request) {
  std::vector<std::string> f = diffnet::fuzz::split(data, size, "|#|");
  const unsigned flags = f[0].empty() ? 0u : static_cast<unsigned char>(f[0][0]);
  auto field = [&f](size_t i) { return i < f.size() ? f[i] : std::string(); };
  std::vector<diffnet::serve::UploadPart> parts;
  for (size_t i = 4; i < f.size(); i += 3) parts.push_back({field(i), field(i + 1), field(i + 2)});
  const std::string name = field(1), maps = field(2);
  diffnet::serve::PredictRequest r =
      diffnet::serve::parse_predict_request(flags & 1, parts, field(3), (flags & 2) ? &name : nullptr,
                                            (flags & 4) ? &maps : nullptr, (flags & 8) ? &maps : nullptr, 4'000'000,
                                            (flags & 16) ? &maps : nullptr);
  // An accepted image has its header read under the limit; an accepted document (PDF, TIFF) is only
  // sniffed here, its pages are read and checked one by one at inference.
  if (r.status == 0 && (r.bytes.empty() || (!r.document && (r.info.width <= 0 || r.info.height <= 0 ||
                                                            r.info.width * r.info.height > 4'000'000))))
    __builtin_trap();
  if (r.status != 0 && (r.status != 400 || r.error.empty())) __builtin_trap();
  // An accepted ?downscale is auto (0) or 1..8; without the parameter it stays -1 (the server's own).
  if (r.status == 0 && (r.downscale < -1 || r.downscale > 8 || ((flags & 16) != 0) != (r.downscale != -1))) __builtin_trap();
}
