// runtime/cuda/loader.h: finds and dlopens the CUDA libraries at run time (DESIGN.md §3: no
// build-time dependency), searching where PyTorch's wheels and the toolkit put them.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

// Folders searched after $KILN_CUDA_LIB_DIR and before the toolkit's: the Python package adds each
// site-packages' nvidia/cu13/lib here (where PyTorch's CUDA wheels keep cuBLAS and nvJitLink).
void AddLibrarySearchDir(const std::string& dir);

// The paths tried for `soname` ("libcublas.so.13"), in order: $KILN_CUDA_LIB_DIR, the added
// folders, the toolkit's targets/x86_64-linux/lib (and /usr/local/nvidia/lib64 for the driver),
// then the bare soname for the dynamic loader's own search.
std::vector<std::string> CandidatePaths(const std::string& soname);

struct Library {
  void* handle = nullptr;
  std::string path;   // the candidate that loaded
  std::string error;  // when handle is null: every candidate's dlerror, joined by "; "
};

// dlopens the first candidate that loads (RTLD_NOW | RTLD_LOCAL). Never throws.
Library OpenLibrary(const std::string& soname);

// For the libraries that need the driver (cuBLAS, cuBLASLt, cuFFT, cuSOLVER): without a usable
// driver, *reason is the driver's UnavailableReason(); else OpenLibrary(soname), and when that fails
// *reason is "<name> (<soname>) could not be loaded: <errors>". A null handle means *reason is set.
Library OpenLibraryWithDriver(const char* name, const char* soname, std::string* reason);

// dlsym, or nullptr.
void* FindSymbol(void* handle, const char* name);

// Sets `fn` to `lib`'s symbol `name`; when it is missing, the first such name goes to *reason
// ("<path> lacks <name>") and fn stays null. For the loaders' tables of entry points.
template <typename Fn>
void ResolveSymbol(const Library& lib, Fn*& fn, const char* name, std::string* reason) {
  fn = reinterpret_cast<Fn*>(FindSymbol(lib.handle, name));
  if (fn == nullptr && reason->empty()) *reason = lib.path + " lacks " + name;
}

}  // namespace kiln::cuda
