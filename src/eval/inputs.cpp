#include <algorithm>
#include <filesystem>
#include <system_error>

#include "diffnet/common.h"
#include "diffnet/document.h"
#include "diffnet/predict.h"

namespace diffnet {

std::vector<std::string> list_image_files(const std::string& dir, bool documents) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir, "not a directory");
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string path = it->path().string(), ext = file_extension(path);
    const bool image = ext == ".jpg" || ext == ".jpeg" || ext == ".png";
    if (image || (documents && is_input_document_name(path))) files.push_back(path);
  }
  if (ec) throw Error(dir, "cannot list directory: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace diffnet
