#include <algorithm>
#include <filesystem>
#include <system_error>

#include "diffnet/common.h"
#include "diffnet/predict.h"

namespace diffnet {

std::vector<std::string> list_image_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir, "not a directory");
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string ext = file_extension(it->path().string());
    if (ext == ".jpg" || ext == ".jpeg" || ext == ".png") files.push_back(it->path().string());
  }
  if (ec) throw Error(dir, "cannot list directory: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace diffnet
