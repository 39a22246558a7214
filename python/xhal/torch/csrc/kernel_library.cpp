// The package's WGSL kernels as the device compiles them: the embedded kernel files
// (python/xhal/torch/kernels, written into this extension by _build.py), recipes that
// instantiate them, and a cache of compiled kernels per device.

#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "xhal_torch.h"

namespace xhal_torch {

// Written by _build.py from kernels/**/*.wgsl into the build folder.
struct EmbeddedKernelFile {
  const char* path;
  const char* text;
};
extern const EmbeddedKernelFile kEmbeddedKernelFiles[];
extern const size_t kEmbeddedKernelFileCount;

const char* wgsl_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "f32";
    case at::kHalf:
      return "f16";
    case at::kDouble:
      return "f64";
    case at::kInt:
      return "i32";
    case at::kLong:
      return "i64";
    case at::kBool:
      return "bool";
    default:
      return nullptr;
  }
}

const char* storage_type(at::ScalarType dtype) { return dtype == at::kBool ? "u32" : wgsl_type(dtype); }

const std::string& kernel_file(const std::string& path) {
  static const auto* files = [] {
    auto* map = new std::map<std::string, std::string>();
    for (size_t i = 0; i < kEmbeddedKernelFileCount; i++) {
      map->emplace(kEmbeddedKernelFiles[i].path, kEmbeddedKernelFiles[i].text);
    }
    return map;
  }();
  auto found = files->find(path);
  TORCH_CHECK(found != files->end(), "xhal: the kernel file ", path, " is not in this build of xhal.torch");
  return found->second;
}

uint32_t kernel_constant(const char* path, const char* name) {
  static std::mutex mutex;
  static std::map<std::pair<const char*, const char*>, uint32_t> cache;  // by the literals' addresses
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find({path, name});
  if (found != cache.end()) return found->second;
  const std::string& text = kernel_file(path);
  const std::string declaration = std::string("const ") + name + ": u32 = ";
  size_t at = text.find(declaration);
  // The name must be whole: OP_ADD is not the start of OP_ADDCMUL.
  while (at != std::string::npos && at > 0 && text[at - 1] != '\n') at = text.find(declaration, at + 1);
  TORCH_CHECK(at != std::string::npos, "xhal: kernels/", path, " declares no constant ", name);
  const uint32_t value = static_cast<uint32_t>(std::stoul(text.substr(at + declaration.size())));
  cache.emplace(std::make_pair(path, name), value);
  return value;
}

namespace {

// `text` with each `alias NAME = ...;` line whose NAME `types` names set to its type; counts
// the aliases it set in `found`.
std::string with_types(const std::string& text, const KernelRecipe& recipe, std::vector<bool>& found) {
  std::string out;
  out.reserve(text.size());
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = text.size();
    const std::string line = text.substr(line_start, line_end - line_start);
    bool replaced = false;
    if (line.rfind("alias ", 0) == 0) {
      for (size_t k = 0; k < recipe.types.size(); k++) {
        const std::string head = "alias " + recipe.types[k].first + " = ";
        if (line.rfind(head, 0) != 0) continue;
        const size_t end = line.find(';');
        out += head + recipe.types[k].second + line.substr(end);
        found[k] = true;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += line;
    out += '\n';
    line_start = line_end + 1;
  }
  return out;
}

std::string type_of(const KernelRecipe& recipe, const char* alias) {
  for (const auto& [name, type] : recipe.types) {
    if (name == alias) return type;
  }
  return "";
}

}  // namespace

std::string compose(const KernelRecipe& recipe) {
  std::string source;
  for (const auto& [name, type] : recipe.types) {
    if (type == "f16") {
      source += "enable f16;\n";
      break;
    }
  }
  std::vector<bool> found(recipe.types.size(), false);
  bool declares_float = false, declares_int = false;
  std::string body;
  for (const std::string& file : recipe.files) {
    const std::string& text = kernel_file(file);
    declares_float = declares_float || text.find("\nalias F = ") != std::string::npos;
    declares_int = declares_int || text.find("\nalias I = ") != std::string::npos;
    body += "// --- " + file + "\n" + with_types(text, recipe, found);
  }
  for (size_t k = 0; k < found.size(); k++) {
    TORCH_CHECK(found[k], "xhal: no kernel file of the recipe for `", recipe.entry, "` declares alias ",
                recipe.types[k].first);
  }
  // The libraries of the compute types, with the types the recipe gives them (or the defaults).
  if (declares_float) {
    const std::string type = type_of(recipe, "F");
    source += "// --- lib/float_" + (type.empty() ? std::string("f32") : type) + ".wgsl\n";
    source += kernel_file("lib/float_" + (type.empty() ? std::string("f32") : type) + ".wgsl");
  }
  if (declares_int) {
    const std::string type = type_of(recipe, "I");
    source += "// --- lib/int_" + (type.empty() ? std::string("i32") : type) + ".wgsl\n";
    source += kernel_file("lib/int_" + (type.empty() ? std::string("i32") : type) + ".wgsl");
  }
  return source + body;
}

namespace {

std::unique_ptr<Kernel> compile(Device& device, const std::string& source, const char* entry,
                                const std::vector<std::pair<std::string, double>>& overrides) {
  std::vector<xhal_override_t> values;
  values.reserve(overrides.size());
  for (const auto& [name, value] : overrides) values.push_back(xhal_override_t{name.c_str(), value});
  xhal_module_t* module = nullptr;
  check(xhal_module_load_wgsl(device.device, source.c_str(), values.data(), values.size(), &module),
        "compile a kernel");
  auto compiled = std::make_unique<Kernel>();
  xhal_status_t status = xhal_module_kernel(module, entry, &compiled->kernel);
  xhal_module_destroy(module);
  check(status, "kernel");
  xhal_kernel_info_t info{};
  info.struct_size = sizeof info;
  check(xhal_kernel_get_info(compiled->kernel, &info), "kernel info");
  for (uint32_t i = 0; i < info.binding_count; i++) {
    xhal_param_info_t param{};
    param.struct_size = sizeof param;
    check(xhal_kernel_param(compiled->kernel, i, &param), "kernel parameter");
    compiled->bindings.push_back(param.binding);
  }
  return compiled;
}

const Kernel& remember(Device& device, const std::string& key, std::unique_ptr<Kernel> compiled) {
  std::lock_guard<std::mutex> lock(device.mutex);
  auto [slot, inserted] = device.kernels.try_emplace(key, nullptr);
  if (inserted) {
    slot->second = std::move(compiled);
  } else {
    xhal_kernel_destroy(compiled->kernel);  // another thread compiled it meanwhile
  }
  return *slot->second;
}

}  // namespace

const Kernel* find_kernel_by_key(Device& device, const std::string& key) {
  std::lock_guard<std::mutex> lock(device.mutex);
  auto found = device.kernels.find(key);
  return found == device.kernels.end() ? nullptr : found->second.get();
}

const Kernel& remember_recipe_kernel(Device& device, const std::string& key, const KernelRecipe& recipe) {
  return remember(device, key, compile(device, compose(recipe), recipe.entry.c_str(), recipe.overrides));
}

const Kernel& kernel(Device& device, const std::string& source) {
  if (const Kernel* found = find_kernel_by_key(device, source)) return *found;
  return remember(device, source, compile(device, source, nullptr, {}));
}

}  // namespace xhal_torch
