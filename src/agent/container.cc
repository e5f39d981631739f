#include "agent/container.h"

#include <algorithm>
#include <filesystem>
#include <map>

namespace unipool::agent {
namespace {

namespace fs = std::filesystem;

// Every runtime gets the host network (rendezvous), the job's mounts and
// GPU devices, and the environment the agent set.
const std::map<std::string, std::string>& Builtins() {
  static const auto* kRuntimes = new std::map<std::string, std::string>{
      {"bwrap",
       "bwrap --die-with-parent --unshare-all --share-net --tmpfs / "
       "{rootfs:--ro-bind {src} {dst}} --proc /proc --dev /dev --tmpfs /tmp "
       "{devices:--dev-bind {dev} {dev}} {mounts:{bind} {src} {dst}} --chdir {workdir} "
       "-- {command}"},
      {"podman",
       "podman run --rm --network host --ipc host --user {uid}:{gid} --cap-drop ALL "
       "--security-opt no-new-privileges {env:--env {name}} "
       "{mounts:--volume {src}:{dst}:{mode}} {devices:--device {dev}} --workdir {workdir} "
       "{image} {command}"},
      {"docker",
       "docker run --rm --network host --ipc host --user {uid}:{gid} --cap-drop ALL "
       "--security-opt no-new-privileges {env:--env {name}} "
       "{mounts:--volume {src}:{dst}:{mode}} {devices:--device {dev}} --workdir {workdir} "
       "{image} {command}"},
      {"apptainer",
       "apptainer exec --containall --no-home --nv {mounts:--bind {src}:{dst}:{mode}} "
       "--pwd {workdir} {image} {command}"},
      {"enroot",
       "enroot start {env:--env {name}} {mounts:--mount {src}:{dst}:x-create=dir,{mode}} "
       "{image} {command}"},
  };
  return *kRuntimes;
}

// Splits at top-level spaces (not inside braces). Errors: unbalanced braces.
Result<std::vector<std::string>> Words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  int depth = 0;
  for (char c : text) {
    if (c == '{') ++depth;
    if (c == '}' && --depth < 0) return InvalidArgument("container template: unbalanced '}'");
    if (c == ' ' && depth == 0) {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
      continue;
    }
    word += c;
  }
  if (depth != 0) return InvalidArgument("container template: unbalanced '{'");
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

// Replaces {name} in `word` with values[name]. Errors: an unknown one.
Result<std::string> Fill(const std::string& word,
                         const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < word.size();) {
    if (word[i] != '{') {
      out += word[i++];
      continue;
    }
    const size_t end = word.find('}', i);
    const std::string key = word.substr(i + 1, end - i - 1);
    auto it = values.find(key);
    if (it == values.end()) {
      return InvalidArgument("container template: unknown placeholder {" + key + "}");
    }
    out += it->second;
    i = end + 1;
  }
  return out;
}

// WORDS once per item, each item's values filled in.
Status Repeat(const std::string& words,
              const std::vector<std::map<std::string, std::string>>& items,
              std::vector<std::string>* out) {
  Result<std::vector<std::string>> ws = Words(words);
  if (!ws.ok()) return ws.status();
  for (const auto& values : items) {
    for (const std::string& w : *ws) {
      Result<std::string> filled = Fill(w, values);
      if (!filled.ok()) return filled.status();
      out->push_back(*filled);
    }
  }
  return Status::Ok();
}

// The items a repeated placeholder stands for.
Result<std::vector<std::map<std::string, std::string>>> Items(const std::string& kind,
                                                              const ContainerRun& run) {
  std::vector<std::map<std::string, std::string>> items;
  if (kind == "mounts") {
    for (const ContainerMount& m : run.mounts) {
      items.push_back({{"src", m.src},
                       {"dst", m.dst},
                       {"mode", m.read_only ? "ro" : "rw"},
                       {"bind", m.read_only ? "--ro-bind" : "--bind"}});
    }
  } else if (kind == "devices") {
    for (const std::string& d : run.devices) items.push_back({{"dev", d}});
  } else if (kind == "env") {
    for (const std::string& n : run.env_names) items.push_back({{"name", n}});
  } else if (kind == "rootfs") {
    std::error_code ec;
    if (!fs::is_directory(run.image, ec)) {
      return FailedPrecondition("spec.image: " + run.image +
                                " is not a directory on this node (this runtime runs an "
                                "unpacked root filesystem)");
    }
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(run.image, ec)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      items.push_back({{"src", run.image + "/" + n}, {"dst", "/" + n}});
    }
  } else {
    return InvalidArgument("container template: unknown placeholder {" + kind + ":...}");
  }
  return items;
}

}  // namespace

Result<std::string> RuntimeTemplate(const std::string& name) {
  auto it = Builtins().find(name);
  if (it != Builtins().end()) return it->second;
  return InvalidArgument(
      "--container-runtime: expected bwrap, podman, docker, apptainer or "
      "enroot (or give --container-template), got '" +
      name + "'");
}

Result<std::vector<std::string>> ExpandTemplate(const std::string& tmpl, const ContainerRun& run) {
  const std::map<std::string, std::string> values = {
      {"image", run.image},
      {"workdir", run.workdir.empty() ? "/" : run.workdir},
      {"uid", std::to_string(run.uid)},
      {"gid", std::to_string(run.gid)},
      {"gpus", run.gpus}};
  Result<std::vector<std::string>> words = Words(tmpl);
  if (!words.ok()) return words.status();
  std::vector<std::string> out;
  bool command = false;
  for (const std::string& w : *words) {
    if (w == "{command}") {
      out.insert(out.end(), run.command.begin(), run.command.end());
      command = true;
      continue;
    }
    const size_t colon = w.find(':');
    // {kind:WORDS}: a ':' before the first '}' ({uid}:{gid} is two values).
    if (w.starts_with("{") && w.ends_with("}") && colon != std::string::npos &&
        colon < w.find('}')) {
      const std::string kind = w.substr(1, colon - 1);
      Result<std::vector<std::map<std::string, std::string>>> items = Items(kind, run);
      if (!items.ok()) return items.status();
      UNIPOOL_RETURN_IF_ERROR(Repeat(w.substr(colon + 1, w.size() - colon - 2), *items, &out));
      continue;
    }
    Result<std::string> filled = Fill(w, values);
    if (!filled.ok()) return filled.status();
    out.push_back(*filled);
  }
  if (!command) return InvalidArgument("container template: no {command}");
  return out;
}

std::vector<std::string> GpuDevices(const std::vector<int>& gpus) {
  std::vector<std::string> out;
  std::error_code ec;
  for (int g : gpus) {
    const std::string d = "/dev/nvidia" + std::to_string(g);
    if (fs::exists(d, ec)) out.push_back(d);
  }
  for (const char* d : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
    if (!out.empty() && fs::exists(d, ec)) out.push_back(d);
  }
  return out;
}

}  // namespace unipool::agent
