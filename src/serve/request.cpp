// The checks of a POST /predict request before inference (src/serve/request.h).
#include "serve/request.h"

#include <algorithm>

#include "diffnet/common.h"
#include "diffnet/document.h"
#include "diffnet/predict.h"

namespace diffnet::serve {

PredictRequest parse_predict_request(bool multipart, std::vector<UploadPart> parts, std::string body,
                                     const std::string* name_param, const std::string* maps_param,
                                     const std::string* report_param, int64_t max_pixels,
                                     const std::string* downscale_param) {
  PredictRequest r;
  auto fail = [&r](const std::string& message) {
    r.status = 400;
    r.error = message;
    return r;
  };
  if (multipart) {
    auto file = std::find_if(parts.begin(), parts.end(), [](const UploadPart& p) { return p.name == "file"; });
    if (file == parts.end()) return fail("multipart upload needs a field named 'file'");
    body = std::move(file->content);
    if (!file->filename.empty()) r.name = file->filename;
  } else if (name_param) {
    r.name = *name_param;
  }
  if (!is_valid_utf8(r.name)) return fail("the file name is not valid UTF-8");
  // Error messages carry the name and are read back through what() (a C string): a NUL would cut them
  // short, down to an empty {"error": ""} (found by fuzz_serve_request).
  if (r.name.find('\0') != std::string::npos) return fail("the file name contains a NUL byte");
  if (body.empty()) return fail("empty upload: send the image as the body or a multipart field 'file'");
  r.maps = maps_param && *maps_param != "0";
  r.report = report_param && *report_param != "0";
  if (downscale_param) {
    try {
      r.downscale = parse_downscale(*downscale_param);
    } catch (const Error&) {
      return fail("downscale must be auto or an integer from 1 to 8");
    }
  }
  r.bytes.assign(body.begin(), body.end());
  if (sniff_document_format(r.bytes.data(), r.bytes.size()) != "image") {
    r.document = true;
    return r;
  }
  try {
    DecodeOptions dopt;
    dopt.max_pixels = max_pixels;
    r.info = read_image_info_bytes(r.bytes, r.name, dopt);
  } catch (const Error& e) {
    return fail(e.what());
  }
  return r;
}

}  // namespace diffnet::serve
