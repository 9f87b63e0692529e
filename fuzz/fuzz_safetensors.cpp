// safetensors parsing and validation of a weights file from its bytes (parse_safetensors), and a
// round trip of whatever it accepts through serialize_safetensors.
#include "diffnet/safetensors.h"
#include "fuzz/fuzz_target.h"

DIFFNET_FUZZ_TARGET(safetensors) {
  const std::vector<uint8_t> bytes(data, data + size);
  diffnet::SafeTensors st = diffnet::parse_safetensors(bytes, "fuzz.safetensors");
  // Accepted files must survive a round trip with the same names, dtypes and shapes.
  diffnet::SafeTensors again = diffnet::parse_safetensors(diffnet::serialize_safetensors(st.tensors, st.metadata), "again");
  if (again.tensors.size() != st.tensors.size() || again.metadata != st.metadata) __builtin_trap();
  for (const auto& [name, t] : st.tensors) {
    auto it = again.tensors.find(name);
    if (it == again.tensors.end() || it->second.scalar_type() != t.scalar_type() || it->second.sizes() != t.sizes())
      __builtin_trap();
  }
}
