// Internal interface of the serve module: the checks of a POST /predict request before inference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "diffnet/image_io.h"

namespace diffnet::serve {

// One part of a multipart/form-data body, as the HTTP library hands it over.
struct UploadPart {
  std::string name, filename, content;
};

// What POST /predict is asked to do, or why not (status != 0: the HTTP error status and its message).
struct PredictRequest {
  int status = 0;
  std::string error;
  std::string name = "upload";  // the part's filename, else ?name=, else "upload"
  std::vector<uint8_t> bytes;   // the encoded image
  bool maps = false;            // ?maps= present and not "0"
  bool report = false;          // ?report= present and not "0"
  int64_t downscale = -1;       // ?downscale= (auto: kDownscaleAuto, or 1..8: PredictOptions::downscale for this
                                // upload); -1: not given, the server's own
  ImageInfo info;               // from the header: the admission cost (width x height); not for documents
  bool document = false;        // a PDF or TIFF (sniffed): its pages are read and admitted one by one
};

// Contract: pure (no I/O, no model, never throws diffnet::Error): picks the image (multipart: the field
// "file", else the body), its name (valid UTF-8 without NUL), ?maps, ?report and ?downscale (auto or an
// integer 1..8), and reads the image header under max_pixels (a PDF or TIFF, by sniff_document_format, is only
// recognised: document = true). Failures are status 400 with the message the server returns as {"error": ...}.
// name_param / maps_param / report_param / downscale_param: null when the query has no such parameter.
PredictRequest parse_predict_request(bool multipart, std::vector<UploadPart> parts, std::string body,
                                     const std::string* name_param, const std::string* maps_param,
                                     const std::string* report_param, int64_t max_pixels,
                                     const std::string* downscale_param = nullptr);

}  // namespace diffnet::serve
