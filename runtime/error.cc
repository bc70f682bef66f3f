// runtime/error.cc: the failure path of KILN_INTERNAL_ASSERT.
#include "runtime/error.h"

namespace kiln {

void InternalAssertFailed(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(StrCat("internal assert failed: ", cond, " at ", file, ":", line,
                     msg.empty() ? "" : " (", msg, msg.empty() ? "" : ")",
                     ". This is a bug in kiln; please report it."));
}

}  // namespace kiln
