#include "test_io_util.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "testing.h"

namespace diffnet::testutil {

std::string io(const std::string& file) { return data_path("io/" + file); }

at::Tensor read_pnm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string magic;
  in >> magic;
  auto next_int = [&]() {
    int c = in.peek();
    while (std::isspace(c) || c == '#') {
      if (c == '#') {
        std::string line;
        std::getline(in, line);
      } else {
        in.get();
      }
      c = in.peek();
    }
    int v;
    in >> v;
    return v;
  };
  const int w = next_int(), h = next_int(), maxval = next_int();
  in.get();  // single whitespace before the raster
  if (maxval != 255 || (magic != "P6" && magic != "P5")) throw std::runtime_error("unsupported PNM " + path);
  const int c = magic == "P6" ? 3 : 1;
  at::Tensor t = c == 3 ? at::empty({h, w, 3}, at::kByte) : at::empty({h, w}, at::kByte);
  in.read(reinterpret_cast<char*>(t.data_ptr<uint8_t>()), static_cast<std::streamsize>(h) * w * c);
  if (!in) throw std::runtime_error("short PNM " + path);
  return t;
}

std::string write_temp_bytes(const std::string& tag, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string path = temp_dir(tag) + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace diffnet::testutil
