// What the key tables (config_keys.h) drive: reading TOML, printing it,
// describing the keys and checking their rules. This file is the one toml++
// adapter: everything toml++ reports or throws becomes a Status here.
#include <toml++/toml.h>

#include <algorithm>
#include <concepts>
#include <limits>
#include <set>
#include <sstream>
#include <utility>
#include <variant>

#include "daemon/server/config_keys.h"

namespace vaed::server {

namespace {

using config_keys::EntryKeys;
using config_keys::EnumField;
using config_keys::EnumListField;
using config_keys::ForEachSection;
using config_keys::Key;
using config_keys::Range;

// ---- Rules, shared by the reader and CheckKeyRules.

std::string RangeText(Range r) { return std::to_string(r.min) + ".." + std::to_string(r.max); }

// Integer keys; bool has its own overloads.
template <typename T>
concept Integer = std::integral<T> && !std::same_as<T, bool>;

template <Integer T>
bool InRange(T v, Range r) {
  return !std::cmp_less(v, r.min) && !std::cmp_greater(v, r.max);
}

// The rule an integer breaks, "" when it keeps it.
template <Integer T>
std::string RangeRule(T v, Range r) {
  return InRange(v, r) ? "" : "is " + std::to_string(v) + "; must be " + RangeText(r);
}
template <Integer T>
std::string ListItemRule(T v, Range r) {
  return InRange(v, r) ? "" : "holds " + std::to_string(v) + "; values must be " + RangeText(r);
}

// "\"pad\" or \"shrink\"", "\"a\", \"b\" or \"c\"".
std::string AllowedText(const std::vector<std::string>& allowed) {
  std::string s;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) s += i + 1 == allowed.size() ? " or " : ", ";
    s += "\"" + allowed[i] + "\"";
  }
  return s;
}

// The rule `v` breaks ("is 0; must be 1..256"), or "" when it keeps them.
template <typename S>
std::string BrokenRule(const Key<S>&, const std::string&) {
  return "";
}
template <typename S, Integer T>
std::string BrokenRule(const Key<S>& key, T v) {
  return RangeRule(v, key.range);
}
template <typename S>
std::string BrokenRule(const Key<S>&, bool) {
  return "";
}
template <typename S, typename T>
std::string BrokenRule(const Key<S>& key, const std::optional<T>& v) {
  return v ? BrokenRule(key, *v) : "";
}
template <typename S>
std::string BrokenRule(const Key<S>& key, const std::vector<uint32_t>& values) {
  for (uint32_t v : values) {
    if (std::string broken = ListItemRule(v, key.range); !broken.empty()) return broken;
  }
  return "";
}
template <typename S>
std::string BrokenRule(const Key<S>&, const std::vector<std::string>&) {
  return "";
}

// ---- Reading. `At` names the value for errors: "t.toml: group.size ...".

struct At {
  const std::string& source;
  std::string key;
  Status Error(std::string_view rule) const {
    return InvalidArgument(source + ": " + key + " " + std::string(rule));
  }
};

Status ReadTable(const At& at, const toml::table& t, const auto& keys, auto* out);

template <typename S>
Status Read(const At& at, const Key<S>&, const toml::node& n, std::string* out) {
  if (!n.is_string()) return at.Error("must be a string");
  *out = n.as_string()->get();
  return Status::Ok();
}

template <typename S>
Status Read(const At& at, const Key<S>&, const toml::node& n, bool* out) {
  if (!n.is_boolean()) return at.Error("must be true or false");
  *out = n.as_boolean()->get();
  return Status::Ok();
}

template <typename S, Integer T>
Status Read(const At& at, const Key<S>& key, const toml::node& n, T* out) {
  if (!n.is_integer()) return at.Error("must be an integer");
  const int64_t v = n.as_integer()->get();
  if (std::string broken = BrokenRule(key, v); !broken.empty()) return at.Error(broken);
  *out = static_cast<T>(v);
  return Status::Ok();
}

// An optional stays unset when its key is absent.
template <typename S, typename T>
Status Read(const At& at, const Key<S>& key, const toml::node& n, std::optional<T>* out) {
  T v{};
  VAED_RETURN_IF_ERROR(Read(at, key, n, &v));
  *out = v;
  return Status::Ok();
}

// Lists replace the value they are read over.
template <typename S>
Status Read(const At& at, const Key<S>& key, const toml::node& n, std::vector<uint32_t>* out) {
  const toml::array* arr = n.as_array();
  if (!arr) return at.Error("must be an array of integers");
  std::vector<int64_t> values;
  for (const toml::node& item : *arr) {
    if (!item.is_integer()) return at.Error("must be an array of integers");
    const int64_t v = item.as_integer()->get();
    if (std::string broken = ListItemRule(v, key.range); !broken.empty()) return at.Error(broken);
    values.push_back(v);
  }
  out->assign(values.begin(), values.end());
  return Status::Ok();
}

template <typename S>
Status Read(const At& at, const Key<S>&, const toml::node& n, std::vector<std::string>* out) {
  const toml::array* arr = n.as_array();
  if (!arr) return at.Error("must be an array of strings");
  out->clear();
  for (const toml::node& item : *arr) {
    if (!item.is_string()) return at.Error("must be an array of strings");
    out->push_back(item.as_string()->get());
  }
  return Status::Ok();
}

// [[models.entry]]: a file that lists models replaces the embedded list as
// a whole.
template <typename S>
Status Read(const At& at, const Key<S>&, const toml::node& n,
            std::vector<models::ModelConfig>* out) {
  const toml::array* arr = n.as_array();
  if (!arr) return at.Error("must be an array of tables ([[models.entry]])");
  out->clear();
  for (size_t i = 0; i < arr->size(); ++i) {
    const At entry{at.source, at.key + "[" + std::to_string(i) + "]"};
    const toml::table* t = arr->get(i)->as_table();
    if (!t) return entry.Error("must be a table");
    models::ModelConfig m;
    VAED_RETURN_IF_ERROR(ReadTable(entry, *t, EntryKeys(), &m));
    if (m.name.empty()) {
      return At{at.source, entry.key + ".name"}.Error("is required and must not be empty");
    }
    if (!t->contains("kind")) {
      return At{at.source, entry.key + ".kind"}.Error(
          "is required (taef2, demo, h3_video, h3_audio or h3)");
    }
    out->push_back(std::move(m));
  }
  return Status::Ok();
}

// A key's value into its member of `*out`: a plain member by its type, an
// enum member by its names.
template <typename S, typename M>
Status ReadMember(const At& at, const Key<S>& key, const toml::node& n, M S::*member, S* out) {
  return Read(at, key, n, &(out->*member));
}
template <typename S>
Status ReadMember(const At& at, const Key<S>&, const toml::node& n, const EnumField<S>& field,
                  S* out) {
  if (!n.is_string()) return at.Error("must be a string");
  const std::string v = n.as_string()->get();
  if (!field.set(out, v)) return at.Error("is '" + v + "'; must be " + AllowedText(field.names));
  return Status::Ok();
}

template <typename S>
Status ReadMember(const At& at, const Key<S>& key, const toml::node& n,
                  const EnumListField<S>& field, S* out) {
  std::vector<std::string> texts;
  VAED_RETURN_IF_ERROR(Read(at, key, n, &texts));
  if (const std::optional<std::string> unknown = field.set(out, texts)) {
    return at.Error("lists '" + *unknown + "'; values must be " + AllowedText(field.names));
  }
  return Status::Ok();
}

// Reads the keys of `keys` present in `t` into `*out`, after refusing any
// key no row has.
Status ReadTable(const At& at, const toml::table& t, const auto& keys, auto* out) {
  for (const auto& [name, node] : t) {
    const std::string_view key_name = name.str();  // clang 14 lambdas cannot capture bindings
    const auto row = std::find_if(keys.begin(), keys.end(),
                                  [&](const auto& k) { return key_name == k.name; });
    if (row == keys.end()) {
      std::set<std::string> known;
      for (const auto& k : keys) known.insert(k.name);
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      const std::string key =
          at.key.empty() ? std::string(name.str()) : at.key + "." + std::string(name.str());
      return At{at.source, key}.Error("is not a known key (known here: " + list + ")");
    }
  }
  for (const auto& key : keys) {
    const toml::node* n = t.get(key.name);
    if (!n) continue;
    const At here{at.source, at.key.empty() ? key.name : at.key + "." + key.name};
    VAED_RETURN_IF_ERROR(
        std::visit([&](const auto& member) { return ReadMember(here, key, *n, member, out); },
                   key.member));
  }
  return Status::Ok();
}

// ---- Printing.

toml::array IntArray(const std::vector<uint32_t>& values) {
  toml::array a;
  for (uint32_t v : values) a.push_back(int64_t{v});
  return a;
}

toml::array StringArray(const std::vector<std::string>& values) {
  toml::array a;
  for (const std::string& v : values) a.push_back(v);
  return a;
}

toml::table PrintTable(const auto& keys, const auto& in);

template <typename S>
void Print(const Key<S>& key, const std::string& v, toml::table* t) {
  if (!(key.print.skip_empty && v.empty())) t->insert(key.name, v);
}
template <typename S>
void Print(const Key<S>& key, bool v, toml::table* t) {
  t->insert(key.name, v);
}
template <typename S, Integer T>
void Print(const Key<S>& key, T v, toml::table* t) {
  t->insert(key.name, static_cast<int64_t>(v));
}
template <typename S, typename T>
void Print(const Key<S>& key, const std::optional<T>& v, toml::table* t) {
  if (v) {
    t->insert(key.name, static_cast<int64_t>(*v));
  } else if (key.print.unset_value) {
    t->insert(key.name, *key.print.unset_value);
  }
}
template <typename S>
void Print(const Key<S>& key, const std::vector<uint32_t>& v, toml::table* t) {
  t->insert(key.name, IntArray(v));
}
template <typename S>
void Print(const Key<S>& key, const std::vector<std::string>& v, toml::table* t) {
  t->insert(key.name, StringArray(v));
}
template <typename S>
void Print(const Key<S>& key, const std::vector<models::ModelConfig>& entries, toml::table* t) {
  toml::array a;
  for (const models::ModelConfig& m : entries) a.push_back(PrintTable(EntryKeys(), m));
  t->insert(key.name, std::move(a));
}

template <typename S, typename M>
void PrintMember(const Key<S>& key, M S::*member, const S& in, toml::table* t) {
  Print(key, in.*member, t);
}
template <typename S>
void PrintMember(const Key<S>& key, const EnumField<S>& field, const S& in, toml::table* t) {
  t->insert(key.name, field.get(in));
}

template <typename S>
void PrintMember(const Key<S>& key, const EnumListField<S>& field, const S& in, toml::table* t) {
  t->insert(key.name, StringArray(field.get(in)));
}

// The keys of `keys` as a TOML table; [[models.entry]] tables print the
// keys of their kind only.
toml::table PrintTable(const auto& keys, const auto& in) {
  toml::table t;
  for (const auto& key : keys) {
    if constexpr (std::same_as<std::decay_t<decltype(in)>, models::ModelConfig>) {
      const std::vector<models::ModelKind>& kinds = key.print.kinds;
      if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), in.kind) == kinds.end()) {
        continue;
      }
    }
    std::visit([&](const auto& member) { PrintMember(key, member, in, &t); }, key.member);
  }
  return t;
}

// ---- Describing and checking.

const char* TypeName(const std::string&) { return "string"; }
const char* TypeName(bool) { return "boolean"; }
template <Integer T>
const char* TypeName(T) {
  return "integer";
}
template <typename T>
const char* TypeName(const std::optional<T>&) {
  return "integer";
}
const char* TypeName(const std::vector<uint32_t>&) { return "array of integers"; }
const char* TypeName(const std::vector<std::string>&) { return "array of strings"; }
const char* TypeName(const std::vector<models::ModelConfig>&) { return "array of tables"; }

// The TOML type of a member: its C++ type's, or a name's (enums).
template <typename S, typename M>
const char* MemberTypeName(M S::*) {
  return TypeName(M{});
}
template <typename S>
const char* MemberTypeName(const EnumField<S>&) {
  return "string";
}
template <typename S>
const char* MemberTypeName(const EnumListField<S>&) {
  return "array of strings";
}

template <typename S>
void Describe(const Key<S>& key, const std::string& prefix, const S* values,
              std::vector<ConfigKeyInfo>* out) {
  ConfigKeyInfo info;
  info.key = prefix + key.name;
  info.type = std::visit([](const auto& member) { return MemberTypeName(member); }, key.member);
  info.min = key.range.min;
  info.max = key.range.max;
  if (const auto* field = std::get_if<EnumField<S>>(&key.member)) info.allowed = field->names;
  if (const auto* list = std::get_if<EnumListField<S>>(&key.member)) info.allowed = list->names;
  info.doc = key.doc;
  const bool entries = std::holds_alternative<std::vector<models::ModelConfig> S::*>(key.member);
  if (values && !entries) {
    toml::table t;
    std::visit([&](const auto& member) { PrintMember(key, member, *values, &t); }, key.member);
    if (const toml::node* n = t.get(key.name)) {
      std::ostringstream text;
      text << toml::node_view<const toml::node>(n);
      info.value = text.str();
    }
  }
  const std::string entry_prefix = info.key + "[].";
  out->push_back(std::move(info));
  if (entries) {
    for (const auto& entry_key : EntryKeys()) {
      Describe<models::ModelConfig>(entry_key, entry_prefix, nullptr, out);
    }
  }
}

std::string FirstBrokenRule(const std::string& prefix, const auto& keys, const auto& in);

// The rule the value of `member` in `in` breaks, with its key, or "".
template <typename S, typename M>
std::string BrokenMemberRule(const std::string& prefix, const Key<S>& key, M S::*member,
                             const S& in) {
  const M& v = in.*member;
  if constexpr (std::same_as<M, std::vector<models::ModelConfig>>) {
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string entry = prefix + key.name + "[" + std::to_string(i) + "].";
      if (std::string b = FirstBrokenRule(entry, EntryKeys(), v[i]); !b.empty()) return b;
    }
    return "";
  } else {
    const std::string rule = BrokenRule(key, v);
    return rule.empty() ? "" : prefix + key.name + " " + rule;
  }
}
// An enum member holds one of its names by construction.
template <typename S>
std::string BrokenMemberRule(const std::string&, const Key<S>&, const EnumField<S>&, const S&) {
  return "";
}
template <typename S>
std::string BrokenMemberRule(const std::string&, const Key<S>&, const EnumListField<S>&,
                             const S&) {
  return "";
}

// The rule a value of `in` breaks, with its key ("group.size is 0; must be
// 1..64"), or "" when none does.
std::string FirstBrokenRule(const std::string& prefix, const auto& keys, const auto& in) {
  for (const auto& key : keys) {
    const std::string broken = std::visit(
        [&](const auto& member) { return BrokenMemberRule(prefix, key, member, in); },
        key.member);
    if (!broken.empty()) return broken;
  }
  return "";
}

}  // namespace

Result<DaemonOptions> ParseConfigToml(std::string_view text, std::string_view source_name,
                                      DaemonOptions base, std::set<std::string>* keys_set) {
  const std::string source(source_name);
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream m;
    m << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
      << e.description();
    return InvalidArgument(m.str());
  }
  std::set<std::string> sections;
  (void)ForEachSection([&](const char* name, auto, const auto&) {
    sections.insert(name);
    return Status::Ok();
  });
  for (const auto& [name, node] : root) {
    if (!sections.count(std::string(name.str()))) {
      std::string list;
      for (const std::string& s : sections) list += (list.empty() ? "" : ", ") + s;
      return At{source, std::string(name.str())}.Error("is not a known key (known here: " + list +
                                                       ")");
    }
  }
  VAED_RETURN_IF_ERROR(ForEachSection([&](const char* name, auto member, const auto& keys) {
    const toml::node* n = root.get(name);
    if (!n) return Status::Ok();
    if (!n->is_table()) return At{source, name}.Error("must be a table");
    return ReadTable(At{source, name}, *n->as_table(), keys, &(base.*member));
  }));
  if (keys_set) {
    for (const auto& [section, node] : root) {
      const toml::table* t = node.as_table();
      for (const auto& [key, value] : t ? *t : toml::table{}) {
        keys_set->insert(std::string(section.str()) + "." + std::string(key.str()));
      }
    }
  }
  // group.ranks without a list of sizes: the default sizes of its ranks.
  if (const toml::table* group = root["group"].as_table();
      group && group->contains("ranks") && !group->contains("qualified_sizes")) {
    base.group.qualified_sizes = engine::DefaultQualifiedSizes(base.group);
  }
  return base;
}

std::string ToToml(const DaemonOptions& options) {
  toml::table root;
  (void)ForEachSection([&](const char* name, auto member, const auto& keys) {
    root.insert(name, PrintTable(keys, options.*member));
    return Status::Ok();
  });
  std::ostringstream ss;
  ss << root << "\n";
  return ss.str();
}

std::vector<ConfigKeyInfo> ListConfigKeys(const DaemonOptions& options) {
  std::vector<ConfigKeyInfo> out;
  (void)ForEachSection([&](const char* name, auto member, const auto& keys) {
    for (const auto& key : keys) Describe(key, std::string(name) + ".", &(options.*member), &out);
    return Status::Ok();
  });
  return out;
}

std::optional<ConfigKeyInfo> FindConfigKey(std::string_view key) {
  for (ConfigKeyInfo& info : ListConfigKeys(DaemonOptions{})) {
    if (info.key == key) return std::move(info);
  }
  return std::nullopt;
}

Status CheckKeyRules(const DaemonOptions& options) {
  std::string broken;
  (void)ForEachSection([&](const char* name, auto member, const auto& keys) {
    if (broken.empty()) broken = FirstBrokenRule(std::string(name) + ".", keys, options.*member);
    return Status::Ok();
  });
  return broken.empty() ? Status::Ok() : InvalidArgument(broken);
}

}  // namespace vaed::server
