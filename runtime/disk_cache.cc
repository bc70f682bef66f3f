// runtime/disk_cache.cc: kiln's on-disk cache files (disk_cache.h).
#include "runtime/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {

void MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
}

}  // namespace

std::string CacheDirectory(const char* env_var, const char* name) {
  if (const char* d = std::getenv(env_var); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/kiln/" + name;
}

bool ReadCacheFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return !out->empty();
}

void WriteCacheFile(const std::string& path, const char* data, size_t n) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) MakeDirs(path.substr(0, slash));
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(reinterpret_cast<uintptr_t>(&tmp));
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;
    f.write(data, static_cast<std::streamsize>(n));
    if (!f) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace kiln
