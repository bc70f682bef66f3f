// runtime/disk_cache.h: files under kiln's cache directory (~/.cache/kiln/<name>), shared by the
// compiled-kernel caches (codegen/llvm_codegen.cc: CPU objects; tensor/cuda/pointwise.cc: cubins).
//
// Entries are written to a temporary name and renamed, so concurrent processes never read half a
// file; a directory that cannot be written only costs speed (writes fail silently).
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

// $<env_var> when set and non-empty, else $HOME/.cache/kiln/<name> (/tmp/.cache/... without HOME).
std::string CacheDirectory(const char* env_var, const char* name);

// The whole file; false when it is missing, unreadable or empty.
bool ReadCacheFile(const std::string& path, std::string* out);

// Creates the directories of `path`'s folder, then writes it atomically (temporary name + rename).
void WriteCacheFile(const std::string& path, const char* data, size_t n);

}  // namespace kiln
