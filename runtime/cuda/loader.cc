// runtime/cuda/loader.cc: the search order of loader.h, and dlopen/dlsym around it.
#include "runtime/cuda/loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "runtime/cuda/driver.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

std::mutex& DirsMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string>& AddedDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

// The toolkit's library folders: /usr/local/cuda first, then versioned installs, newest first.
std::vector<std::string> ToolkitDirs() {
  std::vector<std::string> dirs = {"/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/lib64"};
  std::vector<std::string> versioned;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/local", ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("cuda-", 0) == 0) versioned.push_back(entry.path().string());
  }
  std::sort(versioned.rbegin(), versioned.rend());
  for (const std::string& v : versioned) {
    dirs.push_back(v + "/targets/x86_64-linux/lib");
    dirs.push_back(v + "/lib64");
  }
  return dirs;
}

}  // namespace

void AddLibrarySearchDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(DirsMutex());
  for (const std::string& d : AddedDirs())
    if (d == dir) return;
  AddedDirs().push_back(dir);
}

std::vector<std::string> CandidatePaths(const std::string& soname) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KILN_CUDA_LIB_DIR"); env != nullptr && *env != '\0') dirs.push_back(env);
  // The driver belongs to the machine, not to a wheel or the toolkit (whose lib64/stubs holds a
  // libcuda that only links): after the override, the dynamic loader's search, then where
  // container images mount it.
  bool driver = soname.rfind("libcuda.so", 0) == 0;
  std::vector<std::string> paths;
  for (const std::string& d : dirs) paths.push_back(d + "/" + soname);
  if (driver) {
    paths.push_back(soname);
    paths.push_back("/usr/local/nvidia/lib64/" + soname);
    paths.push_back("/usr/lib/x86_64-linux-gnu/" + soname);
    return paths;
  }
  {
    std::lock_guard<std::mutex> lock(DirsMutex());
    for (const std::string& d : AddedDirs()) paths.push_back(d + "/" + soname);
  }
  for (const std::string& d : ToolkitDirs()) paths.push_back(d + "/" + soname);
  paths.push_back(soname);
  return paths;
}

Library OpenLibrary(const std::string& soname) {
  Library lib;
  for (const std::string& path : CandidatePaths(soname)) {
    // A full path that does not exist is skipped quietly; a file that fails to load is reported.
    if (path.find('/') != std::string::npos && !std::filesystem::exists(path)) continue;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      lib.handle = handle;
      lib.path = path;
      lib.error.clear();
      return lib;
    }
    const char* err = dlerror();
    if (!lib.error.empty()) lib.error += "; ";
    lib.error += (err != nullptr ? err : path + ": unknown dlopen error");
  }
  if (lib.error.empty()) lib.error = soname + ": not found";
  return lib;
}

Library OpenLibraryWithDriver(const char* name, const char* soname, std::string* reason) {
  if (!Available()) {
    *reason = UnavailableReason();
    return Library{};
  }
  Library lib = OpenLibrary(soname);
  if (lib.handle == nullptr) *reason = StrCat(name, " (", soname, ") could not be loaded: ", lib.error);
  return lib;
}

void* FindSymbol(void* handle, const char* name) { return handle == nullptr ? nullptr : dlsym(handle, name); }

}  // namespace kiln::cuda
