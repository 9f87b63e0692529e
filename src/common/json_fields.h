// Config structs <-> JSON through one list of fields. A struct's visitor, written once next to it, calls
// f("json_name", member) for every field; these two templates read and write with it, so a field is named
// in one place. visit is any callable visit(cfg, f) (e.g. a lambda around the struct's visit_fields).
#pragma once

#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "diffnet/common.h"

namespace diffnet {

template <class C, class Visit>
nlohmann::json fields_to_json(const C& c, Visit visit) {
  nlohmann::json j = nlohmann::json::object();
  visit(c, [&](const char* name, const auto& v) { j[name] = v; });
  return j;
}

// Sets every field j names. An unknown name or a value of the wrong type is an Error of `subject` naming
// the field; the names in `own` are left to the caller (read before or after, as it needs).
template <class C, class Visit>
void read_fields(const nlohmann::json& j, C& c, Visit visit, const std::string& subject,
                 std::initializer_list<const char*> own = {}) {
  if (!j.is_object()) throw Error(subject, "expected a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool found = false;
    for (const char* name : own) found = found || it.key() == name;
    if (found) continue;
    visit(c, [&](const char* name, auto& v) {
      if (found || it.key() != name) return;
      found = true;
      try {
        it.value().get_to(v);
      } catch (const nlohmann::json::exception&) {
        throw Error(subject, std::string("field '") + name + "' has the wrong type: " + it.value().dump());
      }
    });
    if (!found) throw Error(subject, "unknown field '" + it.key() + "'");
  }
}

}  // namespace diffnet
