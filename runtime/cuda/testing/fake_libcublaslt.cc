// runtime/cuda/testing/fake_libcublaslt.cc: a stand-in libcublasLt.so.13 for the fake driver's
// no-op kernel mode (as fake_libcublas.cc): the entry points runtime/cuda/cublaslt.cc loads, each
// succeeding without computing anything; the heuristic offers one algorithm needing no workspace.
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {

static int fake_object;

int cublasLtCreate(void** handle) {
  *handle = &fake_object;
  return 0;
}
const char* cublasLtGetStatusString(int) { return "CUBLAS_STATUS_SUCCESS (fake)"; }
int cublasLtMatmulDescCreate(void** desc, int, int) {
  *desc = &fake_object;
  return 0;
}
int cublasLtMatmulDescDestroy(void*) { return 0; }
int cublasLtMatmulDescSetAttribute(void*, int, const void*, size_t) { return 0; }
int cublasLtMatrixLayoutCreate(void** layout, int, uint64_t, uint64_t, int64_t) {
  *layout = &fake_object;
  return 0;
}
int cublasLtMatrixLayoutDestroy(void*) { return 0; }
int cublasLtMatmulPreferenceCreate(void** pref) {
  *pref = &fake_object;
  return 0;
}
int cublasLtMatmulPreferenceDestroy(void*) { return 0; }
int cublasLtMatmulPreferenceSetAttribute(void*, int, const void*, size_t) { return 0; }
// results: cublasLtMatmulHeuristicResult_t (96 bytes: algo, workspace size, state, waves, reserved)
int cublasLtMatmulAlgoGetHeuristic(void*, void*, void*, void*, void*, void*, void*, int requested, void* results,
                                   int* returned) {
  if (requested > 0) std::memset(results, 0, 96);
  *returned = requested > 0 ? 1 : 0;
  return 0;
}
int cublasLtMatmul(void*, void*, const void*, const void*, void*, const void*, void*, const void*, const void*, void*,
                   void*, void*, const void*, void*, size_t, void*) {
  return 0;
}

}  // extern "C"
