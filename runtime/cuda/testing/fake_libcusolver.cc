// runtime/cuda/testing/fake_libcusolver.cc: a stand-in libcusolver.so.12 for the fake driver's
// no-op kernel mode, as fake_libcublas.cc: the entry points runtime/cuda/cusolver.cc loads, each
// succeeding without computing anything (workspaces of 0), so the host side of the linalg ops can
// be walked on a machine without a GPU. Not on the tests' library path.
extern "C" {

int cusolverDnCreate(void** handle) {
  static int fake_handle;
  *handle = &fake_handle;
  return 0;
}
int cusolverDnSetStream(void*, void*) { return 0; }

#define KILN_FAKE_ROUTINES(t)                                                                              \
  int cusolverDn##t##getrf_bufferSize(void*, int, int, void*, int, int* lwork) { return *lwork = 0; }      \
  int cusolverDn##t##getrf(void*, int, int, void*, int, void*, int*, int*) { return 0; }                    \
  int cusolverDn##t##getrs(void*, int, int, int, const void*, int, const int*, void*, int, int*) { return 0; } \
  int cusolverDn##t##potrf_bufferSize(void*, int, int, void*, int, int* lwork) { return *lwork = 0; }      \
  int cusolverDn##t##potrf(void*, int, int, void*, int, void*, int, int*) { return 0; }                     \
  int cusolverDn##t##geqrf_bufferSize(void*, int, int, void*, int, int* lwork) { return *lwork = 0; }      \
  int cusolverDn##t##geqrf(void*, int, int, void*, int, void*, void*, int, int*) { return 0; }              \
  int cusolverDn##t##orgqr_bufferSize(void*, int, int, int, const void*, int, const void*, int* lwork) {   \
    return *lwork = 0;                                                                                     \
  }                                                                                                        \
  int cusolverDn##t##orgqr(void*, int, int, int, void*, int, const void*, void*, int, int*) { return 0; }   \
  int cusolverDn##t##syevd_bufferSize(void*, int, int, int, const void*, int, const void*, int* lwork) {   \
    return *lwork = 0;                                                                                     \
  }                                                                                                        \
  int cusolverDn##t##syevd(void*, int, int, int, void*, int, void*, void*, int, int*) { return 0; }         \
  int cusolverDn##t##gesvd_bufferSize(void*, int, int, int* lwork) { return *lwork = 0; }                  \
  int cusolverDn##t##gesvd(void*, signed char, signed char, int, int, void*, int, void*, void*, int, void*, int, \
                           void*, int, void*, int*) {                                                      \
    return 0;                                                                                              \
  }
KILN_FAKE_ROUTINES(S)
KILN_FAKE_ROUTINES(D)

}  // extern "C"
