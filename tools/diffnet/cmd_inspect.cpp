// diffnet inspect FILE...: image facts (format, size, colour, subsampling, luma table, quality) and an
// optional dump of the DCT map of docs/design.md §3 to safetensors.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/dct.h"
#include "diffnet/image_io.h"
#include "diffnet/safetensors.h"

namespace diffnet::cli {
namespace {

struct InspectOptions {
  std::vector<std::string> files;
  bool json = false;
  std::string dump_dct;
  std::string dct_source;  // "" = file for JPEG, pixels for PNG
  int64_t max_pixels = 100'000'000;
};

void print_human(const std::string& file, const ImageInfo& info) {
  std::string line = file + ": " + info.format + " " + std::to_string(info.width) + "x" + std::to_string(info.height) +
                     ", " + info.color_space + " (" + std::to_string(info.channels) + " channel" +
                     (info.channels == 1 ? "" : "s") + "), " + std::to_string(info.bit_depth) + "-bit";
  if (!info.subsampling.empty()) line += ", " + info.subsampling;
  if (info.format == "jpeg") line += info.progressive ? ", progressive" : ", baseline";
  line += ", EXIF orientation " + std::to_string(info.exif_orientation);
  std::printf("%s\n", line.c_str());
  if (info.format != "jpeg") return;
  if (info.luma_qtable.size() != 64) {
    std::printf("  luma table: not defined in the header\n");
    return;
  }
  if (info.quality_exact)
    std::printf("  quality %d (the luma table is the IJG table at this quality)\n", info.quality_estimate);
  else
    std::printf("  quality ~%d (nearest IJG table; this luma table is not an IJG one)\n", info.quality_estimate);
  std::printf("  luma table (natural order):\n");
  for (int r = 0; r < 8; ++r) {
    std::string row = "   ";
    for (int c = 0; c < 8; ++c) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), " %3lld", static_cast<long long>(info.luma_qtable[r * 8 + c]));
      row += buf;
    }
    std::printf("%s\n", row.c_str());
  }
}

void print_json(const std::string& file, const ImageInfo& info) {
  nlohmann::ordered_json j;
  j["file"] = file;
  j["format"] = info.format;
  j["width"] = info.width;
  j["height"] = info.height;
  j["channels"] = info.channels;
  j["color_space"] = info.color_space;
  j["bit_depth"] = info.bit_depth;
  j["subsampling"] = info.subsampling;
  j["progressive"] = info.progressive;
  j["exif_orientation"] = info.exif_orientation;
  j["luma_qtable"] = info.luma_qtable;
  j["quality_estimate"] = info.quality_estimate;
  j["quality_exact"] = info.quality_exact;
  std::printf("%s\n", j.dump().c_str());
}

// Pads (H, W, 3) up to multiples of 8 with white, at the bottom and right.
at::Tensor pad_white8(const at::Tensor& rgb) {
  const int64_t h = rgb.size(0), w = rgb.size(1);
  const int64_t ph = (h + 7) / 8 * 8, pw = (w + 7) / 8 * 8;
  if (ph == h && pw == w) return rgb;
  at::Tensor out = at::full({ph, pw, 3}, 255, at::kByte);
  out.narrow(0, 0, h).narrow(1, 0, w).copy_(rgb);
  return out;
}

void dump_dct(const InspectOptions& o, const ImageInfo& info) {
  const std::string& file = o.files[0];
  DecodeOptions dopt;
  dopt.max_pixels = o.max_pixels;
  std::string source = o.dct_source.empty() ? (info.format == "jpeg" ? "file" : "pixels") : o.dct_source;
  at::Tensor dct, qt;
  if (source == "file") {
    if (info.format != "jpeg")
      throw Error(file, "a " + info.format + " file has no DCT coefficients (use --dct-source pixels)");
    JpegCoefficients c = read_jpeg_coefficients(file, dopt);
    dct = clip_coefficients(c.coef, c.coef.size(0), c.coef.size(1));
    qt = c.qt;
  } else {
    if (info.format == "jpeg") {
      if (info.luma_qtable.size() != 64) throw Error(file, "JPEG header defines no luma table");
      qt = at::tensor(info.luma_qtable, at::kLong);
    } else {
      qt = ones_table();
    }
    dct = pixel_dct(pad_white8(decode_image(file, dopt)), qt);
  }
  std::map<std::string, std::string> meta = {{"source", source},
                                             {"file", file},
                                             {"width", std::to_string(info.width)},
                                             {"height", std::to_string(info.height)}};
  save_safetensors(o.dump_dct, {{"dct", dct}, {"qt", qt}}, meta);
  std::fprintf(stderr, "inspect: wrote %s (dct %lldx%lld from %s, qt 64)\n", o.dump_dct.c_str(),
               static_cast<long long>(dct.size(0)), static_cast<long long>(dct.size(1)), source.c_str());
}

void run(const InspectOptions& o) {
  if (!o.dump_dct.empty() && o.files.size() != 1)
    throw Error("inspect", "--dump-dct needs exactly one input file, got " + std::to_string(o.files.size()));
  DecodeOptions dopt;
  dopt.max_pixels = o.max_pixels;
  int failures = 0;
  for (const auto& file : o.files) {
    try {
      ImageInfo info = read_image_info(file, dopt);
      if (o.json) print_json(file, info);
      else print_human(file, info);
      if (!o.dump_dct.empty()) dump_dct(o, info);
    } catch (const std::exception& e) {
      if (o.files.size() == 1) throw;
      std::fflush(stdout);
      std::fprintf(stderr, "error: %s\n", e.what());
      ++failures;
    }
  }
  if (failures > 0) exit_code() = 2;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect", "Show JPEG/PNG facts: size, colour space, subsampling, luma table, "
                                                "estimated quality; optionally dump the DCT map");
  sub->add_option("files", o->files, "Image files (JPEG or PNG)")->required()->expected(1, -1);
  sub->add_flag("--json", o->json, "One JSON object per line instead of text");
  sub->add_option("--dump-dct", o->dump_dct,
                  "Write tensors dct (uint8 HxW, clipped |coef|) and qt (int64 64) to this safetensors file "
                  "(exactly one input)");
  sub->add_option("--dct-source", o->dct_source,
                  "Coefficients from the JPEG 'file' (default for JPEG) or recomputed from 'pixels' "
                  "(default for PNG; white-padded to multiples of 8)")
      ->check(CLI::IsMember({"file", "pixels"}));
  sub->add_option("--max-pixels", o->max_pixels, "Refuse images with more pixels than this (<= 0: no limit)")
      ->capture_default_str();
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
