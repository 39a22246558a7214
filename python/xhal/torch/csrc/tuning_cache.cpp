// Choices of the device's tuning passes (which tiled product kernel is faster), kept on disk
// so that a later process on the same device and xhal version starts without timing them.
//
// The file holds one choice a line: `version<TAB>device<TAB>question<TAB>answer`, where
// `device` is the backend, name, vendor and driver version, and `question` names the kernel
// source (with a hash of its text) whose variants were timed. A line that does not parse is
// ignored, so a damaged file costs a tuning pass and nothing else.
//
// A choice only picks between kernels that give the same results bit for bit, but a file
// someone else can write would still let them steer this process, so the file and its folder
// are used only when this user owns them and no one else may write them; otherwise the pass
// runs every time and one warning says why.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "xhal_torch.h"

namespace xhal_torch {
namespace {

std::mutex g_tuning_mutex;
std::string g_tuning_path;  // empty: no cache
std::string g_tuning_version;

std::string without_separators(std::string text) {
  for (char& c : text) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string device_identity(Device& dev) {
  const xhal_device_info_t info = device_info(dev.index);
  auto text = [](const char* s) { return std::string(s == nullptr ? "" : s); };
  return without_separators(text(info.backend) + "|" + text(info.name) + "|" + text(info.vendor) + "|" +
                            text(info.driver_version));
}

// Why `path` (a folder or a file, open as `fd`) may not be trusted, or "".
std::string distrust(const std::string& path, int fd, bool folder) {
  struct stat facts {};
  if (fstat(fd, &facts) != 0) return path + ": " + std::strerror(errno);
  if (folder ? !S_ISDIR(facts.st_mode) : !S_ISREG(facts.st_mode)) {
    return path + " is not a " + (folder ? "folder" : "regular file");
  }
  if (facts.st_uid != geteuid()) return path + " belongs to another user (uid " + std::to_string(facts.st_uid) + ")";
  if ((facts.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    std::ostringstream mode;
    mode << std::oct << (facts.st_mode & 07777);
    return path + " may be written by others (mode " + mode.str() + ")";
  }
  return "";
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void warn_untrusted(const std::string& reason) {
  TORCH_WARN_ONCE("xhal: the tuning cache is not used, because ", reason,
                  "; tuning passes run in every process (XHAL_TORCH_TUNING_CACHE chooses the file, or off)");
}

std::string name_in_folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The cache's folder, open, once it is known to be trusted; -1 when it does not exist (with
// `missing` set) or must not be used (after one warning). The file is then opened relative to
// this descriptor, so that the folder checked is the folder read, whatever is renamed meanwhile.
int open_folder(bool* missing) {
  const std::string folder = folder_of(g_tuning_path);
  *missing = false;
  const int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *missing = true;
    } else {
      warn_untrusted(folder + ": " + std::strerror(errno));
    }
    return -1;
  }
  if (std::string why = distrust(folder, fd, true); !why.empty()) {
    close(fd);
    warn_untrusted(why);
    return -1;
  }
  return fd;
}

// The cache's lines, read through the open folder `folder_fd`, or nullopt when the file must
// not be used (after one warning). A missing file is an empty cache.
std::optional<std::vector<std::string>> read_lines(int folder_fd) {
  const int fd = openat(folder_fd, name_in_folder(g_tuning_path).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::vector<std::string>{};
    warn_untrusted(g_tuning_path + ": " + std::strerror(errno));
    return std::nullopt;
  }
  // Checked on the open file, so that it cannot be swapped between the check and the read.
  if (std::string why = distrust(g_tuning_path, fd, false); !why.empty()) {
    close(fd);
    warn_untrusted(why);
    return std::nullopt;
  }
  std::string text;
  char chunk[4096];
  ssize_t got = 0;
  while ((got = read(fd, chunk, sizeof chunk)) > 0 && text.size() < (1u << 20)) text.append(chunk, got);
  close(fd);
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

struct Entry {
  std::string version, device, question, answer;
};

std::optional<Entry> parse(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
    fields.push_back(line.substr(start, tab - start));
  }
  fields.push_back(line.substr(start));
  if (fields.size() != 4 || fields[3].empty()) return std::nullopt;
  return Entry{fields[0], fields[1], fields[2], fields[3]};
}

bool make_folder(const std::string& folder) {
  struct stat facts {};
  if (lstat(folder.c_str(), &facts) == 0) return true;
  const std::string parent = folder_of(folder);
  if (parent != folder && !make_folder(parent)) return false;
  return mkdir(folder.c_str(), 0700) == 0 || errno == EEXIST;
}

}  // namespace

void set_tuning_cache(const std::string& path, const std::string& version) {
  std::lock_guard<std::mutex> lock(g_tuning_mutex);
  g_tuning_path = path;
  g_tuning_version = without_separators(version);
}

std::string tuning_question(const std::string& name, const std::string& kernel_path) {
  // FNV-1a of the kernel's text: a changed kernel is a new question.
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : kernel_file(kernel_path)) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return without_separators(name + "|" + kernel_path + "|" + hex);
}

std::optional<std::string> cached_tuning(Device& dev, const std::string& question) {
  std::lock_guard<std::mutex> lock(g_tuning_mutex);
  if (g_tuning_path.empty()) return std::nullopt;
  bool missing = false;
  const int folder_fd = open_folder(&missing);
  if (folder_fd < 0) return std::nullopt;
  const std::optional<std::vector<std::string>> lines = read_lines(folder_fd);
  close(folder_fd);
  if (!lines) return std::nullopt;
  const std::string identity = device_identity(dev);
  std::optional<std::string> answer;
  for (const std::string& line : *lines) {
    const std::optional<Entry> entry = parse(line);
    if (entry && entry->version == g_tuning_version && entry->device == identity && entry->question == question) {
      answer = entry->answer;  // the last line wins
    }
  }
  return answer;
}

void keep_tuning(Device& dev, const std::string& question, const std::string& answer) {
  std::lock_guard<std::mutex> lock(g_tuning_mutex);
  if (g_tuning_path.empty()) return;
  bool missing = false;
  int folder_fd = open_folder(&missing);
  // A cache that cannot be written costs a pass in a later process, nothing more.
  if (folder_fd < 0 && missing && make_folder(folder_of(g_tuning_path))) folder_fd = open_folder(&missing);
  if (folder_fd < 0) return;
  const std::optional<std::vector<std::string>> lines = read_lines(folder_fd);
  if (!lines) {
    close(folder_fd);
    return;
  }
  const std::string identity = device_identity(dev);
  std::string text;
  size_t kept = 0;
  // Older versions' lines and other devices' stay (a machine may switch between them), up to
  // a bound that keeps the file small.
  for (auto line = lines->rbegin(); line != lines->rend() && kept < 255; ++line) {
    const std::optional<Entry> entry = parse(*line);
    if (!entry) continue;
    if (entry->version == g_tuning_version && entry->device == identity && entry->question == question) continue;
    text = *line + "\n" + text;
    kept++;
  }
  text += g_tuning_version + "\t" + identity + "\t" + question + "\t" + without_separators(answer) + "\n";
  // Written beside the cache and renamed over it, so that a reader sees the old file or the
  // new one, never a part.
  const std::string name = name_in_folder(g_tuning_path);
  const std::string temporary = name + ".tmp" + std::to_string(getpid());
  const int fd = openat(folder_fd, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    if (!written || renameat(folder_fd, temporary.c_str(), folder_fd, name.c_str()) != 0) {
      unlinkat(folder_fd, temporary.c_str(), 0);
    }
  }
  close(folder_fd);
}

std::optional<size_t> tuned_answer(Device& dev, const char* setting, const std::vector<std::string>& answers,
                                   const std::string& question, const std::function<std::vector<double>()>& time_each,
                                   const std::function<std::string(size_t)>& doing) {
  auto index_of = [&](const std::string& answer) -> std::optional<size_t> {
    for (size_t k = 0; k < answers.size(); k++) {
      if (answers[k] == answer) return k;
    }
    return std::nullopt;
  };
  const char* fixed = std::getenv(setting);
  if (fixed != nullptr && *fixed != '\0') {
    const std::optional<size_t> chosen = index_of(fixed);
    if (!chosen) {
      std::string expected;
      for (size_t k = 0; k < answers.size(); k++) expected += (k == 0 ? "" : " or ") + answers[k];
      TORCH_CHECK(false, "xhal: ", setting, " is '", fixed, "'; expected ", expected);
    }
    return chosen;
  }
  if (const std::optional<std::string> cached = cached_tuning(dev, question)) {
    if (const std::optional<size_t> chosen = index_of(*cached)) {
      if (log_info()) {
        std::fprintf(stderr, "INFO xhal.torch: %s %s (from the tuning cache)\n", dev.label.c_str(),
                     doing(*chosen).c_str());
      }
      return chosen;
    }
  }
  if (capturing_draws()) return std::nullopt;
  const std::vector<double> seconds = time_each();
  TORCH_CHECK(seconds.size() == answers.size(), "xhal: a tuning pass timed ", seconds.size(), " of ", answers.size(),
              " answers to ", question);
  size_t fastest = 0;
  for (size_t k = 1; k < seconds.size(); k++) {
    if (seconds[k] < seconds[fastest]) fastest = k;
  }
  keep_tuning(dev, question, answers[fastest]);
  if (log_info()) {
    std::string timings;
    for (size_t k = 0; k < answers.size(); k++) {
      char figure[64];
      std::snprintf(figure, sizeof figure, "%s%s %.3f ms", k == 0 ? "" : ", ", answers[k].c_str(), seconds[k] * 1e3);
      timings += figure;
    }
    std::fprintf(stderr, "INFO xhal.torch: %s %s (tuned: %s)\n", dev.label.c_str(), doing(fastest).c_str(),
                 timings.c_str());
  }
  return fastest;
}

}  // namespace xhal_torch
