#include "daemon/server/command_line.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/server/config_keys.h"

namespace vaed::server {

namespace {

// What the flags said; empty, 0 or -1 where a flag was not given.
struct Flags {
  std::string config_path;
  bool print_config = false;
  std::string socket;
  std::optional<LogLevel> log_level;
  std::optional<LogFormat> log_format;
  std::string metrics_address;
  bool no_metrics = false;
  uint32_t group_ranks = 0;
  uint32_t group_size = 0;
  int threads = 0;
  uint32_t queue_capacity = 0;
  int64_t memory_budget_mib = -1;
  std::vector<std::string> models;
  std::string taef2_weights;
  std::string default_model;
  std::optional<models::StackTiling> stack_tiling;
};

// --vae-stack-tiling's values: the config's names, and true / false for on /
// off. For parsing only: on and off have two names each, so NameOf would
// not give the config's name back (kConfiguredStackTilingNames does).
constexpr models::NameTable<models::StackTiling, 5> kStackTilingFlagNames = {{
    {models::StackTiling::kAuto, "auto"},
    {models::StackTiling::kOn, "true"},
    {models::StackTiling::kOff, "false"},
    {models::StackTiling::kOn, "on"},
    {models::StackTiling::kOff, "off"},
}};

// The range of integer config key `key` from its table row, as a CLI11
// check (so that a flag and its key accept the same values).
CLI::Validator KeyRange(const std::string& key) {
  const std::optional<ConfigKeyInfo> info = FindConfigKey(key);
  if (!info) {
    // A misspelt key in this file: every value is refused, loudly.
    return CLI::Validator([key](std::string&) { return "vaed bug: no config key " + key; }, "");
  }
  return CLI::Range(info->min, info->max);
}

// Refuses an empty value: an empty --socket or --default-model would
// otherwise read as "not given" and silently keep the config's value.
CLI::Validator NonEmpty() {
  return CLI::Validator(
      [](std::string& v) { return v.empty() ? std::string("must not be empty") : std::string(); },
      "NONEMPTY");
}

// A flag whose value is one of `table`'s names, parsed into `*out` (CLI11
// refuses any other value, naming the flag and the names, before the
// callback runs).
template <typename E, size_t N>
CLI::Option* AddEnumOption(CLI::App* app, const std::string& flag, std::optional<E>* out,
                           const models::NameTable<E, N>& table, const std::string& help) {
  return app
      ->add_option_function<std::string>(
          flag, [out, &table](const std::string& v) { *out = models::ParseName(table, v); }, help)
      ->check(CLI::IsMember(models::NamesOf(table)));
}

// The app with every flag; `f` receives their values on parse.
std::unique_ptr<CLI::App> MakeApp(Flags* f) {
  auto app = std::make_unique<CLI::App>(
      "vaed: per-node VAE decode daemon. Serves decode requests from DiT workers over a\n"
      "ZeroMQ control socket; latents and outputs stay in the clients' shared memory.\n"
      "Runs with its embedded default config (demo model) when given no file.");
  app->set_version_flag("--version", std::string("vaed ") + VAED_VERSION);
  app->add_option("-c,--config", f->config_path,
                  "TOML config file, applied over the embedded defaults")
      ->check(CLI::ExistingFile);
  app->add_option("--socket", f->socket, "control socket path (server.socket)")->check(NonEmpty());
  app->add_option("--group-ranks", f->group_ranks,
                  "local ranks of the VAE group, each with its own executor and models "
                  "(group.ranks); qualifies sizes 1, 2, 4, ... up to the ranks of all nodes "
                  "(x group.world_nodes) unless the config lists group.qualified_sizes")
      ->check(KeyRange("group.ranks"));
  app->add_option("--group-size", f->group_size,
                  "ranks a request decodes on unless it asks (group.size)")
      ->check(KeyRange("group.size"));
  app->add_option("--intra-op-threads", f->threads,
                  "LibTorch intra-op threads (executor.intra_op_threads)")
      ->check(KeyRange("executor.intra_op_threads"));
  app->add_option("--queue-capacity", f->queue_capacity,
                  "waiting decode requests (executor.queue_capacity)")
      ->check(KeyRange("executor.queue_capacity"));
  AddEnumOption(app.get(), "--log-level", &f->log_level, kLogLevelNames,
                "trace|debug|info|warn|error|critical|off (log.level)");
  AddEnumOption(app.get(), "--log-format", &f->log_format, kLogFormatNames,
                "log line format: text, or json (one object per line) for log shippers "
                "(log.format)");
  CLI::Option* metrics_address =
      app->add_option("--metrics-address", f->metrics_address,
                      "HOST:PORT of the Prometheus endpoint, e.g. 127.0.0.1:9464 or [::1]:0 "
                      "(port 0 = any free port); enables metrics (metrics.address, "
                      "metrics.port)");
  app->add_flag("--no-metrics", f->no_metrics,
                "no Prometheus endpoint and no metrics collection (metrics.enabled = false)")
      ->excludes(metrics_address);
  app->add_option("--model", f->models,
                  "add or replace a model: "
                  "NAME=KIND[:WEIGHTS[:CONFIG[:AUDIO_WEIGHTS[:AUDIO_CONFIG]]]], e.g. "
                  "taef2=taef2:/path/taef2_decoder.safetensors, "
                  "h3=h3_video:/path/model.safetensors:/path/config.json or "
                  "h3=h3:VIDEO_WEIGHTS:VIDEO_CONFIG:AUDIO_WEIGHTS:AUDIO_CONFIG (KIND: taef2, "
                  "demo, h3_video, h3_audio (NAME=h3_audio:AUDIO_WEIGHTS:AUDIO_CONFIG), h3; an "
                  "H3 decoder without weights uses seeded random weights; empty fields are "
                  "allowed, e.g. h3=h3:::/a.safetensors:/a.json)");
  app->add_option("--taef2-weights", f->taef2_weights,
                  "shorthand for --model taef2=taef2:PATH that also makes taef2 the default "
                  "model unless --default-model says otherwise")
      ->check(CLI::ExistingFile);
  app->add_option("--default-model", f->default_model,
                  "model used when a request names none (models.default; without it, the "
                  "first --model that is not a demo model replaces a demo default)")
      ->check(NonEmpty());
  AddEnumOption(app.get(), "--vae-stack-tiling", &f->stack_tiling, kStackTilingFlagNames,
                  "tile scheduling of every tiled model when a request does not choose: auto "
                  "(stack when >= 2 same-shape tiles and the measured memory estimate fits), "
                  "true/on (always stack), false/off (one call per tile); sets each h3_video/h3 "
                  "entry's stack_tiling");
  app->add_option("--memory-budget-mib", f->memory_budget_mib,
                  "tensor memory budget of the daemon in MiB, 0 = none "
                  "(executor.memory_budget_mib)")
      ->check(KeyRange("executor.memory_budget_mib"));
  app->add_flag("--print-config", f->print_config, "print the effective config as TOML and exit");
  return app;
}

// Parses "NAME=KIND[:WEIGHTS[:CONFIG[:AUDIO_WEIGHTS[:AUDIO_CONFIG]]]]" from
// --model. For kind h3_audio, WEIGHTS and CONFIG are the audio decoder's.
Result<models::ModelConfig> ParseModelFlag(const std::string& spec) {
  models::ModelConfig m;
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--model '" + spec +
                           "' must look like NAME=KIND[:WEIGHTS[:CONFIG[:AUDIO_WEIGHTS[:"
                           "AUDIO_CONFIG]]]]");
  }
  m.name = spec.substr(0, eq);
  std::vector<std::string> fields;
  std::string rest = spec.substr(eq + 1);
  for (size_t colon; (colon = rest.find(':')) != std::string::npos;) {
    fields.push_back(rest.substr(0, colon));
    rest = rest.substr(colon + 1);
  }
  fields.push_back(rest);
  if (fields[0].empty()) return InvalidArgument("--model '" + spec + "' has an empty KIND");
  const std::optional<models::ModelKind> kind = models::ParseName(models::kModelKindNames, fields[0]);
  if (!kind) {
    return InvalidArgument("--model '" + spec + "': unknown model kind '" + fields[0] +
                           "' for model '" + m.name +
                           "' (known: " + models::JoinedNames(models::kModelKindNames) + ")");
  }
  m.kind = *kind;
  if (fields.size() > 5) {
    return InvalidArgument("--model '" + spec + "' has " + std::to_string(fields.size() - 1) +
                           " paths; at most 4 (WEIGHTS:CONFIG:AUDIO_WEIGHTS:AUDIO_CONFIG)");
  }
  fields.resize(5);
  if (m.kind == models::ModelKind::kH3Audio) {
    if (!fields[3].empty() || !fields[4].empty()) {
      return InvalidArgument("--model '" + spec +
                             "': kind h3_audio takes NAME=h3_audio[:AUDIO_WEIGHTS[:AUDIO_CONFIG]]");
    }
    m.audio_weights_path = fields[1];
    m.audio_config_path = fields[2];
  } else {
    m.weights_path = fields[1];
    m.config_path = fields[2];
    m.audio_weights_path = fields[3];
    m.audio_config_path = fields[4];
  }
  return m;
}

// Parses --metrics-address: "HOST:PORT", IPv6 hosts in brackets
// ("[::1]:9464").
Status ParseMetricsAddress(const std::string& spec, MetricsOptions* out) {
  const std::string usage = "--metrics-address '" + spec +
                            "' must look like HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464 "
                            "(PORT 0..65535; 0 = any free port)";
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    return InvalidArgument(usage);
  }
  std::string host = spec.substr(0, colon);
  const std::string port = spec.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return InvalidArgument(usage);
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return InvalidArgument(usage);  // an IPv6 host needs its brackets
  }
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(usage);
  }
  const unsigned long value = std::stoul(port);
  if (value > 65535) return InvalidArgument(usage);
  out->address = std::move(host);
  out->port = static_cast<uint32_t>(value);
  return Status::Ok();
}

void AddOrReplaceModel(std::vector<models::ModelConfig>* entries, models::ModelConfig m) {
  for (auto& e : *entries) {
    if (e.name == m.name) {
      e = std::move(m);
      return;
    }
  }
  entries->push_back(std::move(m));
}

// Whether `name` is a configured entry of kind demo.
bool IsDemoModel(const ModelsOptions& o, const std::string& name) {
  for (const models::ModelConfig& e : o.entries) {
    if (e.name == name) return e.kind == models::ModelKind::kDemo;
  }
  return false;
}

// The first of `entries` whose kind is not demo; "" when there is none.
std::string FirstRealModel(const std::vector<models::ModelConfig>& entries) {
  for (const models::ModelConfig& e : entries) {
    if (e.kind != models::ModelKind::kDemo) return e.name;
  }
  return "";
}

// models.default, decided in this one place once the entries are final
// (a daemon given real models does not default to the demo:
// `vaed --model h3=...` then `decode(latent)` used to go to the demo model
// and fail, and so did a --config file listing a real model without naming
// models.default). The first that applies:
//   --default-model;
//   "taef2" with --taef2-weights;
//   `file_default`: what the --config file named, else its first entry that
//   is not a demo, else the embedded default ("demo"); but when that names
//   a demo model and --model added a model of another kind, the first such.
Result<std::string> DecideDefaultModel(const Flags& f, const ModelsOptions& o,
                                       const std::string& file_default) {
  if (!f.default_model.empty()) return f.default_model;
  if (!f.taef2_weights.empty()) return std::string("taef2");
  std::vector<models::ModelConfig> from_flags;
  for (const std::string& spec : f.models) {
    VAED_ASSIGN_OR_RETURN(models::ModelConfig m, ParseModelFlag(spec));
    from_flags.push_back(std::move(m));
  }
  const std::string first_real_flag = FirstRealModel(from_flags);
  if (!first_real_flag.empty() && IsDemoModel(o, file_default)) return first_real_flag;
  return file_default;
}

// --model, --taef2-weights and --vae-stack-tiling, in that order (the
// default model is DecideDefaultModel's).
Status ApplyModelFlags(const Flags& f, ModelsOptions* o) {
  for (const std::string& spec : f.models) {
    VAED_ASSIGN_OR_RETURN(models::ModelConfig m, ParseModelFlag(spec));
    AddOrReplaceModel(&o->entries, std::move(m));
  }
  if (!f.taef2_weights.empty()) {
    models::ModelConfig m;
    m.name = "taef2";
    m.kind = models::ModelKind::kTaef2;
    m.weights_path = f.taef2_weights;
    AddOrReplaceModel(&o->entries, std::move(m));
  }
  if (f.stack_tiling) {
    for (models::ModelConfig& m : o->entries) {
      if (m.kind == models::ModelKind::kH3Video || m.kind == models::ModelKind::kH3) {
        m.stack_tiling = *f.stack_tiling;
      }
    }
  }
  return Status::Ok();
}

// The flags given, over the options of the config files. `sizes_listed`:
// the --config file lists group.qualified_sizes (which --group-ranks then
// keeps).
Status ApplyFlags(const Flags& f, bool sizes_listed, DaemonOptions* o) {
  if (!f.socket.empty()) o->server.socket = f.socket;
  if (f.threads > 0) o->executor.intra_op_threads = f.threads;
  if (f.group_ranks > 0) {
    o->group.ranks = f.group_ranks;
    if (!sizes_listed) o->group.qualified_sizes = engine::DefaultQualifiedSizes(o->group);
  }
  if (f.group_size > 0) o->group.size = f.group_size;
  if (f.queue_capacity > 0) o->executor.queue_capacity = f.queue_capacity;
  if (f.log_level) o->log.level = *f.log_level;
  if (f.log_format) o->log.format = *f.log_format;
  if (!f.metrics_address.empty()) {
    VAED_RETURN_IF_ERROR(ParseMetricsAddress(f.metrics_address, &o->metrics));
    o->metrics.enabled = true;
  }
  if (f.no_metrics) o->metrics.enabled = false;
  VAED_RETURN_IF_ERROR(ApplyModelFlags(f, &o->models));
  if (f.memory_budget_mib >= 0) {
    o->executor.memory_budget_mib = static_cast<uint64_t>(f.memory_budget_mib);
  }
  return Status::Ok();
}

// The embedded defaults, the --config file, the flags; validated.
Result<DaemonOptions> ResolveOptions(const Flags& f) {
  VAED_ASSIGN_OR_RETURN(DaemonOptions o,
                        ParseConfigToml(kDefaultConfigToml, "embedded defaults", DaemonOptions{}));
  // The default before the flags: the --config file's models.default, else
  // its first real entry, else the embedded one.
  std::string file_default = o.models.default_model;
  std::set<std::string> file_keys;  // the keys the --config file sets
  if (!f.config_path.empty()) {
    VAED_ASSIGN_OR_RETURN(o, LoadConfigFile(f.config_path, std::move(o), &file_keys));
    if (file_keys.count("models.default") > 0 && !o.models.default_model.empty()) {
      file_default = o.models.default_model;
    } else if (std::string first = FirstRealModel(o.models.entries); !first.empty()) {
      file_default = first;
    }
  }
  VAED_RETURN_IF_ERROR(ApplyFlags(f, file_keys.count("group.qualified_sizes") > 0, &o));
  VAED_ASSIGN_OR_RETURN(o.models.default_model, DecideDefaultModel(f, o.models, file_default));
  VAED_RETURN_IF_ERROR(ValidateOptions(o));
  return o;
}

}  // namespace

CommandLine ParseCommandLine(int argc, char** argv) {
  CommandLine out;
  Flags flags;
  std::unique_ptr<CLI::App> app = MakeApp(&flags);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    out.exit_now = true;
    // --help and --version exit 0; every usage error 2, as an invalid
    // config does (CLI11's own codes, 100-127, mean nothing to systemd).
    out.exit_code = app->exit(e) == 0 ? 0 : 2;
    return out;
  }
  Result<DaemonOptions> options = ResolveOptions(flags);
  if (!options.ok()) {
    std::cerr << "vaed: " << options.status().message() << "\n";
    out.exit_now = true;
    out.exit_code = 2;
    return out;
  }
  if (flags.print_config) {
    std::cout << ToToml(*options);
    out.exit_now = true;
    return out;
  }
  out.options = std::move(options).value();
  return out;
}

std::string CommandLineHelp() {
  Flags flags;
  return MakeApp(&flags)->help();
}

}  // namespace vaed::server
