// runtime/cuda/testing/fake_libcufft.cc: a stand-in libcufft.so.12 for the fake driver's no-op
// kernel mode, as fake_libcublas.cc: the entry points runtime/cuda/cufft.cc loads, each succeeding
// without computing anything. Not on the tests' library path.
extern "C" {

int cufftPlan1d(int* plan, int, int, int) {
  static int next = 1;
  *plan = next++;
  return 0;
}
int cufftSetStream(int, void*) { return 0; }
int cufftExecC2C(int, void*, void*, int) { return 0; }
int cufftExecZ2Z(int, void*, void*, int) { return 0; }
int cufftExecR2C(int, void*, void*) { return 0; }
int cufftExecD2Z(int, void*, void*) { return 0; }
int cufftExecC2R(int, void*, void*) { return 0; }
int cufftExecZ2D(int, void*, void*) { return 0; }
int cufftDestroy(int) { return 0; }

}  // extern "C"
