// codegen/llvm_codegen.cc: kernel IR -> LLVM IR -> O3 for the host -> object -> ORC LLJIT.
//
// Note [Kernel cache]: a compiled kernel is keyed by HashString(Serialize(kernel) + host CPU
// name and features + codegen version (a hash of codegen/'s sources and LLVM's version) +
// options). The in-memory map holds CompiledKernels; the disk cache holds the object file
// (<CacheDir>/<key>.o, written to a temporary name and renamed, so concurrent processes never
// read half a file). A disk hit skips LLVM IR generation and optimisation entirely: the object
// is linked as is. Each object is linked into its own JITDylib (which links against the main
// one, where process symbols resolve: libm, libmvec), so the same symbol may be linked again
// after ClearMemoryCache. One mutex guards the JIT and the maps; compiled code runs without it.
//
// Note [Kernels keyed by body]: the in-memory map is keyed without the kernel's name (BodyKey).
// Inductor names kernels by position (cpp_fused_..._17), so a model's repeated layers produce the
// same kernels under different names: a 16-layer GPT's training step made 546 kernels and spent
// 9.4 of its 12.5 s of cold compile in LLVM, most of them repeats. A repeat is a memory hit that
// runs the first one's code under its own name (PyTorch's Inductor likewise defines a kernel
// whose source it has already seen only once). The object's symbol carries the name, so the
// disk cache keeps the full key. LLVM work runs outside the mutex, each compile with its own
// context and target machine, so CompileMany compiles on several threads; a kernel being compiled
// on one thread is waited for, not compiled again, by another that asks for the same body.
//
// Note [Small code model]: a JIT's default code model is the large one, where every constant's
// address is a 64-bit immediate. In a 16-lane SiLU body that has ~15 constants and runs out of
// the 32 vector registers, each reload was a movabs and a broadcast load. In the small model a
// constant is one rip-relative broadcast. That needs the code and its constants within 2 GB of
// each other, so objects are linked by JITLink, whose in-process memory manager places all of an
// object's sections in one block (the RuntimeDyld linker maps them separately, and would not
// report an out-of-range offset).
#include "codegen/llvm_codegen.h"

#include <algorithm>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>
#include <sstream>
#include <unordered_map>

#include "codegen/codegen_fingerprint.h"
#include "codegen/llvm_emit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/JITLink/JITLinkMemoryManager.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "runtime/disk_cache.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace kiln::codegen {
namespace {

// Part of every cache key: a hash of this package's sources (the :codegen_fingerprint genrule)
// and LLVM's version, so objects a different code generator wrote are never linked from disk.
// (A hand-bumped version number was forgotten once: a fixed tanh kept running the old kernels.)
constexpr const char* kCodegenVersion = "kiln-llvm-codegen " KILN_CODEGEN_FINGERPRINT " llvm " LLVM_VERSION_STRING;

std::string ErrText(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

// --- the JIT and the host ----------------------------------------------------------------------

// The target both the JIT and the object emitter use: the host CPU and its features.
llvm::orc::JITTargetMachineBuilder HostMachineBuilder(const HostTarget& host) {
  auto jtmb = llvm::orc::JITTargetMachineBuilder(llvm::Triple(llvm::sys::getProcessTriple()));
  jtmb.setCPU(host.cpu);
  jtmb.addFeatures(host.features);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  jtmb.setCodeModel(llvm::CodeModel::Small);  // Note [Small code model]
  return jtmb;
}

struct JitState {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  HostTarget host;
  std::string cpu_key;
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<CompiledKernel>> memory;  // by BodyKey
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<CompiledKernel>>> in_flight;
  CacheStats stats;
  int64_t dylib_count = 0;
  // objects of kernels compiled together, by group key, linked once each (Note [Kernels compiled together])
  std::unordered_map<std::string, llvm::orc::JITDylib*> linked_groups;
};

JitState& State() {
  static JitState* state = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    // glibc's vector math (the LIBMVEC-X86 vector library); absent on other libcs.
    auto* s = new JitState();
    s->host.have_libmvec = !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1");
    s->host.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> host;
    llvm::sys::getHostCPUFeatures(host);
    std::vector<std::string> sorted;
    for (auto& f : host) sorted.push_back((f.second ? "+" : "-") + f.first().str());
    std::sort(sorted.begin(), sorted.end());
    s->host.features = sorted;
    s->cpu_key = s->host.cpu;
    for (auto& f : sorted)
      if (f[0] == '+') s->cpu_key += " " + f;
    auto jit = llvm::orc::LLJITBuilder()
                   .setJITTargetMachineBuilder(HostMachineBuilder(s->host))
                   .setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession& es, const llvm::Triple&)
                                                     -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                     auto memory = llvm::jitlink::InProcessMemoryManager::Create();
                     if (!memory) return memory.takeError();
                     return std::make_unique<llvm::orc::ObjectLinkingLayer>(es, std::move(*memory));
                   })
                   .create();
    if (!jit) throw Error("[inductor] could not create the LLVM JIT: " + ErrText(jit.takeError()));
    s->jit = std::move(*jit);
    return s;
  }();
  return *state;
}

// Note [One target machine per thread]: a target machine builds its subtarget (the host's
// features expanded, X86's lowering tables, register classes) on first use, and a fresh one per
// kernel paid for that every time. A target machine serves one compile at a time and no LLVM
// context of its own, so each compiling thread keeps one.
llvm::TargetMachine& HostTargetMachine() {
  thread_local std::unique_ptr<llvm::TargetMachine> machine;
  if (machine == nullptr) {
    auto tm = HostMachineBuilder(State().host).createTargetMachine();
    if (!tm) throw Error("[inductor] no LLVM target machine for this host: " + ErrText(tm.takeError()));
    machine = std::move(*tm);
  }
  return *machine;
}

std::string CacheKey(const Kernel& k, const CodegenOptions& o) {
  return HashString(Serialize(k) + "\n" + State().cpu_key + "\n" + kCodegenVersion +
                    (o.vector_library && State().host.have_libmvec ? " veclib" : " noveclib") + " vw" + std::to_string(o.prefer_vector_width) +
                    (o.inline_exp ? " inline-exp" : ""));
}

// The key without the kernel's name (Note [Kernels keyed by body]).
std::string BodyKey(const Kernel& k, const CodegenOptions& o) {
  Kernel unnamed = k;
  unnamed.name.clear();
  return CacheKey(unnamed, o);
}

std::string SymbolFor(const Kernel& k, const std::string& key) { return k.name + "_" + key.substr(0, 16); }

// Links `object` into a fresh JITDylib (nullptr on failure, with *error).
llvm::orc::JITDylib* LinkObjectDylib(JitState& s, std::unique_ptr<llvm::MemoryBuffer> object, std::string* error) {
  auto jd = s.jit->createJITDylib("kiln_kernel_" + std::to_string(s.dylib_count++));
  if (!jd) { *error = ErrText(jd.takeError()); return nullptr; }
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      s.jit->getDataLayout().getGlobalPrefix());
  if (!gen) { *error = ErrText(gen.takeError()); return nullptr; }
  jd->addGenerator(std::move(*gen));  // libm, libmvec and the rest of the process
  if (auto e = s.jit->addObjectFile(*jd, std::move(object))) { *error = ErrText(std::move(e)); return nullptr; }
  return &*jd;
}

// The address of `symbol` in `jd` (nullptr on failure, with *error).
KernelFn LookUp(JitState& s, llvm::orc::JITDylib& jd, const std::string& symbol, std::string* error) {
  auto sym = s.jit->lookup(jd, symbol);
  if (!sym) { *error = ErrText(sym.takeError()); return nullptr; }
  return reinterpret_cast<KernelFn>(sym->getAddress());
}

// Links `object` into a fresh JITDylib and returns the address of `symbol` (0 on failure).
KernelFn LinkObject(JitState& s, std::unique_ptr<llvm::MemoryBuffer> object, const std::string& symbol,
                    std::string* error) {
  llvm::orc::JITDylib* jd = LinkObjectDylib(s, std::move(object), error);
  return jd == nullptr ? nullptr : LookUp(s, *jd, symbol, error);
}

}  // namespace

// --- CompiledKernel ------------------------------------------------------------------------------

namespace {
std::mutex g_ir_mu;

// Transcendental ops in e (exp, erf, sigmoid...: tens of instructions per element each).
int64_t CountTranscendentals(const Expr& root) {
  int64_t n = 0;
  ForEachExpr(root, [&](const Expr& e) {
    if (e.kind != Expr::Kind::kOp) return;
    switch (e.op) {
      case OpCode::kExp: case OpCode::kLog: case OpCode::kLog1p: case OpCode::kExpm1: case OpCode::kSin:
      case OpCode::kCos: case OpCode::kTanh: case OpCode::kSigmoid: case OpCode::kErf: case OpCode::kPow:
      case OpCode::kGelu: case OpCode::kNormalCdf: case OpCode::kGeluBackward:
      case OpCode::kAtan2:
        ++n;
        break;
      default: break;
    }
  });
  return n;
}

// Note [Parallel grain]: the first outer dim is split over threads once a task has about 32K
// element-steps of work; a step that evaluates transcendentals counts as 1 + 2 per
// transcendental, so a 128x128 GELU (one erf) splits where a 128x128 add does not (waking a
// worker costs a few us): compiled GELU 11.7-12.0 us became 7.7-8.0 us, and GELU forward and
// backward 46-58 us became 34-37 us.
int64_t WorkPerOuterStep(const Kernel& k) {
  int64_t work = 1;
  for (size_t d = 1; d < k.outer.size(); ++d) work *= std::max<int64_t>(k.outer[d], 1);
  int64_t inner = 0;
  for (const Loop& l : k.loops) {
    int64_t weight = 1;
    for (const Stmt& s : l.stmts) weight += 2 * CountTranscendentals(*s.expr);
    inner += l.extent * weight;
  }
  return work * std::max<int64_t>(inner, 1);
}
}  // namespace

CompiledKernel::CompiledKernel(Kernel kernel, std::string hash, KernelFn fn, bool from_cache)
    : kernel_(std::move(kernel)), hash_(std::move(hash)), fn_(fn), from_cache_(from_cache) {
  extents_ = BufferExtents(kernel_);
  grain_ = std::max<int64_t>(1, 32768 / WorkPerOuterStep(kernel_));  // Note [Parallel grain]
}

std::string CompiledKernel::llvm_ir() const {
  std::lock_guard<std::mutex> lock(g_ir_mu);
  if (llvm_ir_.empty()) llvm_ir_ = GenerateLLVMIR(kernel_);
  return llvm_ir_;
}

void CompiledKernel::Run(char** ptrs) const {
  int64_t n0 = kernel_.outer.empty() ? 1 : kernel_.outer[0];
  if (n0 <= 0) return;
  for (int64_t n : kernel_.outer)
    if (n == 0) return;
  if (n0 <= grain_ || GetNumThreads() <= 1 || InParallelRegion()) {
    fn_(ptrs, 0, n0);
    return;
  }
  KernelFn fn = fn_;
  ParallelFor(0, n0, grain_, [fn, ptrs](int64_t b, int64_t e) { fn(ptrs, b, e); });
}

// --- entry points --------------------------------------------------------------------------------

namespace {

// Validate, and refuse float16, which only the NVPTX code generator takes: on x86 without F16C its
// conversions are calls into a runtime the JIT does not link (Inductor's CPU lowering computes
// 16-bit floats in float32 and never asks for it).
void ValidateForCPU(const Kernel& kernel) {
  Validate(kernel);
  auto no_f16 = [&](DType t) {
    KILN_CHECK_VALUE(t != DType::F16, "[inductor.compile] kernel '", kernel.name,
                     "': the CPU code generator has no f16 buffers or casts");
  };
  for (const Buffer& b : kernel.buffers) no_f16(b.dtype);
  for (const Loop& loop : kernel.loops)
    for (const Stmt& st : loop.stmts)
      ForEachExpr(*st.expr, [&](const Expr& e) {
        if (e.kind == Expr::Kind::kCast || e.kind == Expr::Kind::kConst) no_f16(e.dtype);
      });
}

}  // namespace

std::string GenerateLLVMIR(const Kernel& kernel, const CodegenOptions& options) {
  ValidateForCPU(kernel);
  JitState& s = State();
  std::string key = CacheKey(kernel, options);
  std::lock_guard<std::mutex> lock(s.mu);
  llvm::LLVMContext ctx;
  auto m = BuildModule(ctx, kernel, SymbolFor(kernel, key), HostTargetMachine(), options, s.host);
  std::string out;
  llvm::raw_string_ostream os(out);
  m->print(os, nullptr);
  return os.str();
}

namespace {

// Note [Kernels compiled together]: LLVM's fixed cost per module -- building the O3 pipeline and
// its analyses, the code generator's pass pipeline, the object writer, a JITDylib -- was most of
// a small kernel's compile: 2.4 ms of O3 and 2.4 ms of code generation for `x * 1.5 + 1` over 16
// floats, whose optimised IR is 40 lines, and ~6 ms in all for each of the digits CNN's 33
// kernels. So CompileMany builds the kernels it has to compile as one module per thread, a
// function each: the functions call nothing of each other's and are optimised as they would be
// alone (the same code), and the module's object is linked once. On disk the object is written
// once under the group's key (<key of the group>.o) and each kernel's key names it
// (<kernel key>.ref); a process reading a kernel through its .ref links the group's object once
// and finds each of its kernels in it (linked_groups), as a warm start finds them all together.
// A single kernel is written as before (<kernel key>.o). A group that fails to build is compiled
// kernel by kernel, so an error names its kernel.

// The kernel's compiled code read from the disk cache and linked, or nullptr (absent, stale or
// damaged: compile afresh and overwrite it).
std::shared_ptr<CompiledKernel> ReadCached(JitState& s, const Kernel& kernel, const std::string& key,
                                           const std::string& symbol) {
  const std::string dir = CacheDir() + "/";
  std::string bytes, error;
  KernelFn fn = nullptr;
  if (ReadCacheFile(dir + key + ".o", &bytes)) {
    std::lock_guard<std::mutex> lock(s.mu);
    fn = LinkObject(s, llvm::MemoryBuffer::getMemBufferCopy(bytes, symbol), symbol, &error);
  } else {
    std::string group;
    if (!ReadCacheFile(dir + key + ".ref", &group) || group.empty() || group.find('/') != std::string::npos)
      return nullptr;
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.linked_groups.find(group);
    llvm::orc::JITDylib* jd = it == s.linked_groups.end() ? nullptr : it->second;
    if (jd == nullptr && ReadCacheFile(dir + group + ".o", &bytes)) {
      jd = LinkObjectDylib(s, llvm::MemoryBuffer::getMemBufferCopy(bytes, group), &error);
      if (jd != nullptr) s.linked_groups[group] = jd;
    }
    if (jd != nullptr) fn = LookUp(s, *jd, symbol, &error);
  }
  if (fn == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.stats.disk_hits;
  return std::make_shared<CompiledKernel>(kernel, HashKernel(kernel), fn, true);
}

// One object holding a function per kernel (no lock held).
llvm::SmallVector<char, 0> EmitObject(JitState& s, const std::vector<KernelSymbol>& kernels,
                                      const CodegenOptions& options) {
  llvm::LLVMContext ctx;
  llvm::TargetMachine& tm = HostTargetMachine();
  auto m = BuildModule(ctx, kernels, tm, options, s.host);
  llvm::SmallVector<char, 0> obj;
  llvm::raw_svector_ostream os(obj);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
    throw Error("[inductor] the host target cannot emit object files");
  pm.run(*m);
  return obj;
}

// A kernel to compile: what its cache entries and its function are named.
struct ToBuild {
  const Kernel* kernel;
  std::string key, symbol;
};

// The kernels built as one module, linked once, and written to the disk cache (Note [Kernels
// compiled together]); their compiled code, in order.
std::vector<std::shared_ptr<CompiledKernel>> BuildTogether(JitState& s, const std::vector<ToBuild>& group,
                                                           const CodegenOptions& options) {
  std::vector<KernelSymbol> symbols;
  std::string joined_keys, names;
  for (const ToBuild& b : group) {
    symbols.push_back({b.kernel, b.symbol});
    joined_keys += b.key + "\n";
    names += (names.empty() ? "" : ", ") + b.kernel->name;
  }
  const llvm::SmallVector<char, 0> obj = EmitObject(s, symbols, options);
  const std::string name = group.size() == 1 ? group[0].key : HashString(joined_keys);  // a group's key
  std::vector<KernelFn> fns;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    llvm::orc::JITDylib* jd =
        LinkObjectDylib(s, llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(obj.data(), obj.size()), name), &error);
    for (size_t i = 0; jd != nullptr && i < group.size() && error.empty(); ++i) fns.push_back(LookUp(s, *jd, group[i].symbol, &error));
    if (error.empty()) {
      s.stats.compiled += static_cast<int64_t>(group.size());
      if (group.size() > 1) s.linked_groups[name] = jd;
    }
  }
  if (!error.empty()) throw Error("[inductor] linking kernel(s) '" + names + "' failed: " + error);
  if (options.use_cache) {  // only objects that linked; the object before the names that point to it
    const std::string dir = CacheDir() + "/";
    WriteCacheFile(dir + name + ".o", obj.data(), obj.size());
    if (group.size() > 1)
      for (const ToBuild& b : group) WriteCacheFile(dir + b.key + ".ref", name.data(), name.size());
  }
  std::vector<std::shared_ptr<CompiledKernel>> out;
  for (size_t i = 0; i < group.size(); ++i)
    out.push_back(std::make_shared<CompiledKernel>(*group[i].kernel, HashKernel(*group[i].kernel), fns[i], false));
  return out;
}

// `found`'s code under `kernel`'s name (the same object when the names agree).
std::shared_ptr<CompiledKernel> Named(const std::shared_ptr<CompiledKernel>& found, const Kernel& kernel) {
  if (found->name() == kernel.name) return found;
  return std::make_shared<CompiledKernel>(kernel, HashKernel(kernel), found->fn(), true);
}

}  // namespace

std::shared_ptr<CompiledKernel> Compile(const Kernel& kernel, const CodegenOptions& options) {
  return CompileMany({kernel}, 1, options)[0];  // a batch of one: the same caches and in-flight waits
}

std::vector<std::shared_ptr<CompiledKernel>> CompileMany(const std::vector<Kernel>& kernels, int threads,
                                                         const CodegenOptions& options) {
  std::vector<std::shared_ptr<CompiledKernel>> out(kernels.size());
  std::vector<std::exception_ptr> errors(kernels.size());
  JitState& s = State();
  // 1. each body not in memory nor compiled elsewhere is claimed here (Note [Kernels keyed by body]);
  // a repeat of a claimed or in-flight body waits for its first compile
  struct Claim {
    size_t index;
    std::string body;
    ToBuild build;
    std::promise<std::shared_ptr<CompiledKernel>> done;
  };
  std::vector<Claim> claims;
  std::vector<std::pair<size_t, std::shared_future<std::shared_ptr<CompiledKernel>>>> waits;
  for (size_t i = 0; i < kernels.size(); ++i) {
    try {
      ValidateForCPU(kernels[i]);
      if (!options.use_cache) {
        const std::string key = CacheKey(kernels[i], options);
        claims.push_back(Claim{i, "", ToBuild{&kernels[i], key, SymbolFor(kernels[i], key)}, {}});
        continue;
      }
      const std::string body = BodyKey(kernels[i], options);
      std::lock_guard<std::mutex> lock(s.mu);
      if (auto it = s.memory.find(body); it != s.memory.end()) {
        ++s.stats.memory_hits;
        out[i] = Named(it->second, kernels[i]);
      } else if (auto running = s.in_flight.find(body); running != s.in_flight.end()) {
        waits.emplace_back(i, running->second);
      } else {
        const std::string key = CacheKey(kernels[i], options);
        claims.push_back(Claim{i, body, ToBuild{&kernels[i], key, SymbolFor(kernels[i], key)}, {}});
        s.in_flight.emplace(body, claims.back().done.get_future().share());
      }
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  // 2. the disk cache, then the rest built together: a module per thread
  std::vector<std::shared_ptr<CompiledKernel>> built(claims.size());
  std::vector<std::exception_ptr> failed(claims.size());
  std::vector<size_t> to_build;
  for (size_t c = 0; c < claims.size(); ++c) {
    if (options.use_cache) built[c] = ReadCached(s, *claims[c].build.kernel, claims[c].build.key, claims[c].build.symbol);
    if (built[c] == nullptr) to_build.push_back(c);
  }
  const size_t groups = std::min<size_t>(std::max(threads, 1), to_build.size());
  auto build_group = [&](size_t g) {
    std::vector<size_t> members;  // every groups-th, so the groups are of like size
    for (size_t j = g; j < to_build.size(); j += groups) members.push_back(to_build[j]);
    std::vector<ToBuild> group;
    for (size_t c : members) group.push_back(claims[c].build);
    try {
      std::vector<std::shared_ptr<CompiledKernel>> compiled = BuildTogether(s, group, options);
      for (size_t j = 0; j < members.size(); ++j) built[members[j]] = compiled[j];
    } catch (...) {
      if (members.size() == 1) {
        failed[members[0]] = std::current_exception();
        return;
      }
      for (size_t c : members) {  // one by one, so the error names its kernel
        try {
          built[c] = BuildTogether(s, {claims[c].build}, options)[0];
        } catch (...) {
          failed[c] = std::current_exception();
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t g = 1; g < groups; ++g) pool.emplace_back(build_group, g);
  if (groups > 0) build_group(0);
  for (auto& t : pool) t.join();
  // 3. the results published, and the waiting repeats given theirs
  for (size_t c = 0; c < claims.size(); ++c) {
    Claim& claim = claims[c];
    if (options.use_cache) {
      std::lock_guard<std::mutex> lock(s.mu);
      if (built[c] != nullptr) s.memory[claim.body] = built[c];
      s.in_flight.erase(claim.body);
    }
    if (built[c] != nullptr) {
      if (options.use_cache) claim.done.set_value(built[c]);
      out[claim.index] = built[c];
    } else {
      if (options.use_cache) claim.done.set_exception(failed[c]);
      errors[claim.index] = failed[c];
    }
  }
  for (auto& [i, future] : waits) {
    try {
      std::shared_ptr<CompiledKernel> ck = future.get();
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.stats.memory_hits;
      out[i] = Named(ck, kernels[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);  // the first kernel's error, in the caller's order
  return out;
}

CacheStats GetCacheStats() {
  JitState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.stats;
}

void ClearMemoryCache() {
  JitState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.memory.clear();
}

std::string CacheDir() { return CacheDirectory("KILN_INDUCTOR_CACHE_DIR", "inductor"); }

std::string HostCpuKey() { return State().cpu_key; }

}  // namespace kiln::codegen
