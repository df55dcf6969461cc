// The keys of the daemon config, one table per section ([server],
// [quarantine], [executor], [group], [log], [metrics], [profiles], [models]
// and each [[models.entry]]; config_keys.cc). A row names the key, the
// option it sets (a member of the section's struct in config.h, whose
// default is the key's default), its rule (an integer range, or the names
// of its enum) and a one-line doc.
//
// The tables drive everything that spells keys (config_toml.cc): reading
// TOML (ParseConfigToml: the unknown-key check, types, ranges), printing it
// (ToToml, `vaed --print-config`), the per-key checks of options set in
// code or by flags (CheckKeyRules, part of ValidateOptions), the ranges of
// the command-line flags that set a key (command_line.cc), and the test
// that systemd/vaed.toml documents every key with its default
// (tests/daemon/config_test.cc). A new key is one row in config_keys.cc,
// its member and comment in config.h and its entry in systemd/vaed.toml.
//
// Thread-safety: immutable tables (built on first use, thread-safe static
// initialization) and pure functions.
#ifndef VAED_DAEMON_SERVER_CONFIG_KEYS_H_
#define VAED_DAEMON_SERVER_CONFIG_KEYS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "daemon/models/model_config.h"
#include "daemon/models/named_enum.h"
#include "daemon/server/config.h"
#include "vaed/status.h"

namespace vaed::server {

// One key of the config, as ListConfigKeys describes it.
struct ConfigKeyInfo {
  // Dotted, as in error messages: "server.socket". The keys of each
  // [[models.entry]] table: "models.entry[].name".
  std::string key;
  // The TOML type the key takes: "string", "boolean", "integer", "array of
  // integers", "array of strings" or "array of tables" (models.entry).
  std::string type;
  // The value in the options described, as ToToml prints it ("'/run/vaed/
  // vaed.sock'", "[ 1 ]", "true"); "" for models.entry keys and for the
  // models.entry array itself (its entries are not one value).
  std::string value;
  // Integers and lists of integers: the inclusive range. Others: 0..0.
  int64_t min = 0;
  int64_t max = 0;
  // Keys with a closed set of values (an enum member; the reader refuses
  // any other): the names allowed. Empty: any value of the right type.
  std::vector<std::string> allowed;
  std::string doc;  // one line
};

// Every key, section by section in reading order, each section's keys in
// table order, with its value in `options` (ListConfigKeys(DaemonOptions{})
// gives the defaults).
std::vector<ConfigKeyInfo> ListConfigKeys(const DaemonOptions& options);

// The description (with its default value) of `key`, spelled as in
// ListConfigKeys; nullopt for a key no table has.
std::optional<ConfigKeyInfo> FindConfigKey(std::string_view key);

// The per-key rules on options however they were set: every integer within
// its range (models.entry ones too). kInvalidArgument naming the key, as
// the TOML reader words it but without a source: "metrics.port is 70000;
// must be 0..65535". (A closed set of values is an enum: the reader and the
// flags refuse other names, "log.format is 'xml'; must be \"text\" or
// \"json\"", and code cannot set one.)
Status CheckKeyRules(const DaemonOptions& options);

// ---- The tables themselves, for config_toml.cc.
namespace config_keys {

// An integer key's inclusive bounds.
struct Range {
  int64_t min = 0;
  int64_t max = 0;
};

// How a [[models.entry]] key prints: each entry prints the keys of its kind
// only. Keys of the other sections print always.
struct EntryPrint {
  std::vector<models::ModelKind> kinds;  // printed for these kinds; empty: every kind
  std::optional<int64_t> unset_value;  // an unset optional prints as this (the model's
                                       // default); without it, an unset one is left out
  bool skip_empty = false;             // an empty string is left out
};

// A key whose value is one of a closed set of names, stored as an enum
// member of S (named_enum.h): TOML gives the name, the member holds the
// value. Made by Enum() below.
template <typename S>
struct EnumField {
  std::vector<std::string> names;                       // the allowed values, in table order
  std::function<std::string(const S&)> get;             // the member's name
  std::function<bool(S*, std::string_view)> set;        // false: not one of names
};

// The EnumField of `member`, spelled by `table`.
template <typename S, typename E, size_t N>
EnumField<S> Enum(E S::*member, const models::NameTable<E, N>& table) {
  return EnumField<S>{
      models::NamesOf(table),
      [member, &table](const S& s) { return std::string(models::NameOf(table, s.*member)); },
      [member, &table](S* s, std::string_view text) {
        const std::optional<E> value = models::ParseName(table, text);
        if (value) s->*member = *value;
        return value.has_value();
      }};
}

// A key whose value is a list of names of one closed set, stored as a
// std::vector of an enum member of S. Made by EnumList() below.
template <typename S>
struct EnumListField {
  std::vector<std::string> names;                         // the allowed values
  std::function<std::vector<std::string>(const S&)> get;  // the member's names, in order
  // Sets the member to the values `texts` name; returns the first text that
  // is not one of names (the member is then unchanged), nullopt when all are.
  std::function<std::optional<std::string>(S*, const std::vector<std::string>&)> set;
};

// The EnumListField of `member`, spelled by `table`.
template <typename S, typename E, size_t N>
EnumListField<S> EnumList(std::vector<E> S::*member, const models::NameTable<E, N>& table) {
  return EnumListField<S>{
      models::NamesOf(table),
      [member, &table](const S& s) {
        std::vector<std::string> names;
        for (E v : s.*member) names.emplace_back(models::NameOf(table, v));
        return names;
      },
      [member, &table](S* s, const std::vector<std::string>& texts) -> std::optional<std::string> {
        std::vector<E> values;
        for (const std::string& text : texts) {
          const std::optional<E> value = models::ParseName(table, text);
          if (!value) return text;
          values.push_back(*value);
        }
        s->*member = std::move(values);
        return std::nullopt;
      }};
}

// One key of section struct S. The member's type picks how the value is
// read, checked and printed (config_toml.cc).
template <typename S>
struct Key {
  using Member = std::variant<std::string S::*, bool S::*, int S::*, uint32_t S::*, uint64_t S::*,
                              std::optional<int64_t> S::*, std::optional<uint64_t> S::*,
                              std::vector<uint32_t> S::*, std::vector<std::string> S::*,
                              std::vector<models::ModelConfig> S::*, EnumField<S>,
                              EnumListField<S>>;
  const char* name;
  Member member;
  Range range;  // integers and lists of integers
  const char* doc;
  EntryPrint print = {};
};

const std::vector<Key<ServerOptions>>& ServerKeys();
const std::vector<Key<QuarantineOptions>>& QuarantineKeys();
const std::vector<Key<engine::ExecutorOptions>>& ExecutorKeys();
const std::vector<Key<engine::GroupOptions>>& GroupKeys();
const std::vector<Key<LogOptions>>& LogKeys();
const std::vector<Key<MetricsOptions>>& MetricsKeys();
const std::vector<Key<ProfileOptions>>& ProfileKeys();
const std::vector<Key<ModelsOptions>>& ModelsKeys();  // "entry": EntryKeys() per table
const std::vector<Key<models::ModelConfig>>& EntryKeys();

// Calls f(name, member of DaemonOptions, keys) for every section, in reading
// order, until one returns an error.
template <typename F>
Status ForEachSection(F&& f) {
  VAED_RETURN_IF_ERROR(f("server", &DaemonOptions::server, ServerKeys()));
  VAED_RETURN_IF_ERROR(f("quarantine", &DaemonOptions::quarantine, QuarantineKeys()));
  VAED_RETURN_IF_ERROR(f("executor", &DaemonOptions::executor, ExecutorKeys()));
  VAED_RETURN_IF_ERROR(f("group", &DaemonOptions::group, GroupKeys()));
  VAED_RETURN_IF_ERROR(f("log", &DaemonOptions::log, LogKeys()));
  VAED_RETURN_IF_ERROR(f("metrics", &DaemonOptions::metrics, MetricsKeys()));
  VAED_RETURN_IF_ERROR(f("profiles", &DaemonOptions::profiles, ProfileKeys()));
  return f("models", &DaemonOptions::models, ModelsKeys());
}

}  // namespace config_keys
}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CONFIG_KEYS_H_
