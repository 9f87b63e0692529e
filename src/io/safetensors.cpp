// safetensors reader/writer with strict validation (see include/diffnet/safetensors.h).
#include "diffnet/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "diffnet/common.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors I/O assumes a little-endian host"
#endif

namespace diffnet {
namespace {

constexpr uint64_t kMaxHeader = 100'000'000;

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
  int size;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2}, {"BF16", at::kBFloat16, 2},
    {"I64", at::kLong, 8},   {"I32", at::kInt, 4},   {"I16", at::kShort, 2}, {"I8", at::kChar, 1},
    {"U8", at::kByte, 1},    {"BOOL", at::kBool, 1}};

const DtypeInfo* dtype_by_name(const std::string& s) {
  for (const auto& d : kDtypes)
    if (s == d.name) return &d;
  return nullptr;
}
const DtypeInfo* dtype_by_type(at::ScalarType t) {
  for (const auto& d : kDtypes)
    if (t == d.type) return &d;
  return nullptr;
}

struct Entry {
  std::string name;
  const DtypeInfo* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

std::string tensor_subject(const std::string& file, const std::string& tensor) {
  return file + ": tensor '" + tensor + "'";
}

// Parses and validates the JSON header against a data buffer of buffer_size bytes.
Header parse_header(const char* text, size_t n, uint64_t buffer_size, const std::string& file) {
  if (n < 2 || text[0] != '{') throw Error(file, "safetensors header does not start with '{'");
  // Duplicate keys: nlohmann keeps the last one silently, so track the keys of every open object.
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& j) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start) open.emplace_back();
    else if (ev == E::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (ev == E::key && !open.empty()) {
      const std::string k = j.get<std::string>();
      if (!open.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text, text + n, cb);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file, std::string("invalid safetensors JSON header: ") + e.what());
  }
  if (!duplicate.empty()) throw Error(file, "duplicate key '" + duplicate + "' in safetensors header");
  if (!h.is_object()) throw Error(file, "safetensors header is not a JSON object");

  Header out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw Error(file, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) throw Error(file, "__metadata__ value for '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string subj = tensor_subject(file, name);
    if (!v.is_object()) throw Error(subj, "entry is not an object");
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        throw Error(subj, "unknown field '" + f.key() + "'");
    if (!v.contains("dtype") || !v["dtype"].is_string()) throw Error(subj, "missing or non-string dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) throw Error(subj, "missing or non-array shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      throw Error(subj, "data_offsets must be an array of two integers");
    Entry e;
    e.name = name;
    const std::string dt = v["dtype"].get<std::string>();
    e.dtype = dtype_by_name(dt);
    if (!e.dtype) throw Error(subj, "unsupported dtype '" + dt + "'");
    unsigned __int128 numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw Error(subj, "shape entries must be non-negative integers");
      uint64_t x = d.get<uint64_t>();
      if (x > static_cast<uint64_t>(INT64_MAX)) throw Error(subj, "shape entry too large");
      e.shape.push_back(static_cast<int64_t>(x));
      numel *= x;
      if (numel > (static_cast<unsigned __int128>(1) << 64)) numel = static_cast<unsigned __int128>(1) << 64;
    }
    for (const auto& o : v["data_offsets"])
      if (!o.is_number_unsigned()) throw Error(subj, "data_offsets must be non-negative integers");
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    if (e.begin > e.end) throw Error(subj, "data_offsets begin > end");
    if (e.end > buffer_size)
      throw Error(subj, "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                            ") run past the data buffer (" + std::to_string(buffer_size) + " bytes)");
    const unsigned __int128 bytes = numel * static_cast<unsigned>(e.dtype->size);
    if (bytes != static_cast<unsigned __int128>(e.end - e.begin))
      throw Error(subj, "byte size " + std::to_string(e.end - e.begin) + " does not match shape and dtype " + dt +
                            " (expected " + std::to_string(static_cast<uint64_t>(std::min<unsigned __int128>(bytes, UINT64_MAX))) +
                            ")");
    out.entries.push_back(std::move(e));
  }
  std::sort(out.entries.begin(), out.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const auto& e : out.entries) {
    if (e.begin < pos)
      throw Error(tensor_subject(file, e.name), "data overlaps tensor '" + (prev ? prev->name : std::string()) + "'");
    if (e.begin > pos)
      throw Error(tensor_subject(file, e.name), "gap of " + std::to_string(e.begin - pos) + " bytes before its data" +
                                                    (prev ? " (after tensor '" + prev->name + "')" : std::string()));
    pos = e.end;
    prev = &e;
  }
  if (pos != buffer_size)
    throw Error(file, std::to_string(buffer_size - pos) + " bytes at the end of the data buffer belong to no tensor" +
                          (prev ? " (after tensor '" + prev->name + "')" : std::string()));
  return out;
}

uint64_t read_u64le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t check_header_length(uint64_t n, uint64_t file_size, const std::string& file) {
  if (file_size < 8) throw Error(file, "too small for a safetensors file (" + std::to_string(file_size) + " bytes)");
  if (n > kMaxHeader) throw Error(file, "safetensors header length " + std::to_string(n) + " exceeds 100 MB");
  if (n > file_size - 8)
    throw Error(file, "safetensors header length " + std::to_string(n) + " runs past the end of the file");
  return file_size - 8 - n;
}

void check_bool(const at::Tensor& t, const std::string& subj) {
  if (t.scalar_type() != at::kBool) return;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel(); ++i)
    if (p[i] > 1) throw Error(subj, "BOOL value other than 0 or 1");
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

}  // namespace

SafeTensors parse_safetensors(const std::vector<uint8_t>& bytes, const std::string& name) {
  const uint64_t n = bytes.size() >= 8 ? read_u64le(bytes.data()) : 0;
  const uint64_t buffer_size = check_header_length(n, bytes.size(), name);
  Header h = parse_header(reinterpret_cast<const char*>(bytes.data() + 8), n, buffer_size, name);
  const uint8_t* data = bytes.data() + 8 + n;
  SafeTensors out;
  out.metadata = std::move(h.metadata);
  for (const auto& e : h.entries) {
    at::Tensor t = at::empty(e.shape, e.dtype->type);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    check_bool(t, tensor_subject(name, e.name));
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

SafeTensors load_safetensors(const std::string& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  if (std::fseek(f.get(), 0, SEEK_END) != 0) throw Error(path, "cannot seek");
  const long size_l = std::ftell(f.get());
  if (size_l < 0) throw Error(path, "cannot determine size (not a regular file?)");
  const uint64_t file_size = static_cast<uint64_t>(size_l);
  std::rewind(f.get());
  uint8_t len[8] = {0};
  if (file_size >= 8 && std::fread(len, 1, 8, f.get()) != 8) throw Error(path, "read failed");
  const uint64_t n = read_u64le(len);
  const uint64_t buffer_size = check_header_length(n, file_size, path);
  std::string header(n, '\0');
  if (n > 0 && std::fread(&header[0], 1, n, f.get()) != n) throw Error(path, "read failed in header");
  Header h = parse_header(header.data(), n, buffer_size, path);
  SafeTensors out;
  out.metadata = std::move(h.metadata);
  for (const auto& e : h.entries) {  // sorted by offset and tiling: a sequential read
    at::Tensor t = at::empty(e.shape, e.dtype->type);
    const size_t nb = e.end - e.begin;
    if (nb > 0 && std::fread(t.data_ptr(), 1, nb, f.get()) != nb)
      throw Error(tensor_subject(path, e.name), "read failed (file truncated?)");
    check_bool(t, tensor_subject(path, e.name));
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

std::vector<uint8_t> serialize_safetensors(const std::map<std::string, at::Tensor>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  struct Item {
    std::string name;
    const DtypeInfo* dtype;
    at::Tensor t;
  };
  std::vector<Item> items;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__")
      throw Error("safetensors", "invalid tensor name '" + name + "'");
    if (!tensor.defined()) throw Error("safetensors", "tensor '" + name + "' is undefined");
    const DtypeInfo* d = dtype_by_type(tensor.scalar_type());
    if (!d)
      throw Error("safetensors", "tensor '" + name + "' has unsupported dtype " +
                                     std::string(c10::toString(tensor.scalar_type())));
    items.push_back({name, d, tensor.detach().to(at::kCPU).contiguous()});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.dtype->size != b.dtype->size ? a.dtype->size > b.dtype->size : a.name < b.name;
  });
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const auto& it : items) {
    const uint64_t nb = static_cast<uint64_t>(it.t.numel()) * it.dtype->size;
    h[it.name] = {{"dtype", it.dtype->name}, {"shape", it.t.sizes().vec()}, {"data_offsets", {offset, offset + nb}}};
    offset += nb;
  }
  std::string text = h.dump();
  while (text.size() % 8 != 0) text.push_back(' ');
  std::vector<uint8_t> out(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* data = out.data() + 8 + text.size();
  for (const auto& it : items) {
    const size_t nb = static_cast<size_t>(it.t.numel()) * it.dtype->size;
    if (nb > 0) std::memcpy(data, it.t.data_ptr(), nb);
    data += nb;
  }
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<uint8_t> bytes;
  try {
    bytes = serialize_safetensors(tensors, metadata);
  } catch (const Error& e) {
    throw Error(path, e.what());
  }
  write_file_atomic(path, bytes);
}

}  // namespace diffnet
