// runtime/cuda/nvjitlink.cc: the nvJitLink loader and the PTX -> cubin call.
#include "runtime/cuda/nvjitlink.h"

#include <cstdint>
#include <vector>

#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

using Result = int;
struct HandleSt;
using Handle = HandleSt*;
constexpr int kInputPtx = 2;  // NVJITLINK_INPUT_PTX

struct NvJitLink {
  bool available = false;
  std::string reason;
  Result (*create)(Handle*, uint32_t, const char**) = nullptr;
  Result (*destroy)(Handle*) = nullptr;
  Result (*add_data)(Handle, int, const void*, size_t, const char*) = nullptr;
  Result (*complete)(Handle) = nullptr;
  Result (*cubin_size)(Handle, size_t*) = nullptr;
  Result (*cubin)(Handle, void*) = nullptr;
  Result (*error_log_size)(Handle, size_t*) = nullptr;
  Result (*error_log)(Handle, char*) = nullptr;
};

NvJitLink* Load() {
  auto* j = new NvJitLink();
  Library lib = OpenLibrary("libnvJitLink.so.13");
  if (lib.handle == nullptr) {
    j->reason = "nvJitLink (libnvJitLink.so.13) could not be loaded: " + lib.error;
    return j;
  }
  auto find = [&](auto& fn, const char* name) { ResolveSymbol(lib, fn, name, &j->reason); };
  find(j->create, "nvJitLinkCreate");
  find(j->destroy, "nvJitLinkDestroy");
  find(j->add_data, "nvJitLinkAddData");
  find(j->complete, "nvJitLinkComplete");
  find(j->cubin_size, "nvJitLinkGetLinkedCubinSize");
  find(j->cubin, "nvJitLinkGetLinkedCubin");
  find(j->error_log_size, "nvJitLinkGetErrorLogSize");
  find(j->error_log, "nvJitLinkGetErrorLog");
  j->available = j->reason.empty();
  return j;
}

NvJitLink& Lib() {
  static NvJitLink* lib = Load();
  return *lib;
}

}  // namespace

bool NvJitLinkAvailable() { return Lib().available; }
const std::string& NvJitLinkUnavailableReason() { return Lib().reason; }

std::string CompilePtx(const std::string& ptx, int major, int minor) {
  NvJitLink& j = Lib();
  KILN_CHECK(j.available, j.reason);
  std::string arch = "-arch=sm_" + std::to_string(major * 10 + minor);
  const char* options[] = {arch.c_str(), "-O3"};
  Handle h = nullptr;
  Result r = j.create(&h, 2, options);
  KILN_CHECK(r == 0, "nvJitLinkCreate(", arch, ") failed with error ", r);
  auto fail = [&](const char* what, Result code) {
    size_t size = 0;
    std::string log;
    if (j.error_log_size(h, &size) == 0 && size > 1) {
      log.resize(size);
      j.error_log(h, log.data());
      log.resize(size - 1);
    }
    j.destroy(&h);
    throw Error(StrCat("nvJitLink: ", what, " failed with error ", code, " for ", arch, ":\n", log));
  };
  if ((r = j.add_data(h, kInputPtx, ptx.data(), ptx.size(), "kiln.ptx")) != 0) fail("nvJitLinkAddData", r);
  if ((r = j.complete(h)) != 0) fail("nvJitLinkComplete", r);
  size_t size = 0;
  if ((r = j.cubin_size(h, &size)) != 0) fail("nvJitLinkGetLinkedCubinSize", r);
  std::string cubin(size, '\0');
  if ((r = j.cubin(h, cubin.data())) != 0) fail("nvJitLinkGetLinkedCubin", r);
  j.destroy(&h);
  return cubin;
}

}  // namespace kiln::cuda
