// runtime/cuda/testing/fake_libcublas.cc: a stand-in libcublas.so.13 for the fake driver's no-op
// kernel mode (KILN_FAKE_CUDA_NOOP_KERNELS=1, fake_libcuda.cc): the four entry points kiln loads
// (runtime/cuda/cublas.cc), each succeeding without computing anything, so a program's host side,
// matmuls included, can be walked on a machine without a GPU. Not on the tests' library path.
extern "C" {

int cublasCreate_v2(void** handle) {
  static int fake_handle;
  *handle = &fake_handle;
  return 0;
}
int cublasSetStream_v2(void*, void*) { return 0; }
const char* cublasGetStatusString(int) { return "CUBLAS_STATUS_SUCCESS (fake)"; }
int cublasGemmStridedBatchedEx(void*, int, int, int, int, int, const void*, const void*, int, int, long long,
                               const void*, int, int, long long, const void*, void*, int, int, long long, int, int,
                               int) {
  return 0;
}

}  // extern "C"
