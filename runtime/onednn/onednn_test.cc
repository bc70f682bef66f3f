// runtime/onednn/onednn_test.cc: loading oneDNN, the enabled switch, and a reorder run through the
// loaded function table (the smallest primitive: a 2x3 transpose).
#include "runtime/onednn/onednn.h"

#include <gtest/gtest.h>


namespace kiln::onednn {
namespace {

TEST(OneDnn, AvailableOrSaysWhy) {
  if (Available()) {
    EXPECT_EQ(UnavailableReason(), "");
    EXPECT_EQ(Version().rfind("2.", 0), 0u) << Version();
  } else {
    EXPECT_NE(UnavailableReason(), "");
    EXPECT_EQ(Version(), "");
  }
}

TEST(OneDnn, EnabledSwitch) {
  const bool was = Available();
  SetEnabled(false);
  EXPECT_FALSE(Available());
  EXPECT_NE(UnavailableReason().find("enabled = False"), std::string::npos) << UnavailableReason();
  SetEnabled(true);
  EXPECT_EQ(Available(), was);
}

#if KILN_HAVE_ONEDNN
// Another user of the same libgomp (PyTorch's torch.set_num_threads) changes the count between
// two of kiln's calls: SetThreads must still leave it at what kiln asks.
TEST(OneDnn, SetThreadsAfterAnotherLibrarySetsThem) {
  const Api* api = Get();
  if (api == nullptr) GTEST_SKIP() << UnavailableReason();
  ASSERT_NE(api->omp_get_max_threads, nullptr);
  SetThreads(*api, 1);
  EXPECT_EQ(api->omp_get_max_threads(), 1);
  api->omp_set_num_threads(2);  // as torch.set_num_threads(2) would
  SetThreads(*api, 1);
  EXPECT_EQ(api->omp_get_max_threads(), 1);
  SetThreads(*api, 3);
  EXPECT_EQ(api->omp_get_max_threads(), 3);
  SetThreads(*api, 1);
}

TEST(OneDnn, ReorderTransposes) {
  const Api* api = Get();
  if (api == nullptr) GTEST_SKIP() << UnavailableReason();
  SetThreads(*api, 1);
  const dnnl_dims_t dims = {2, 3};
  dnnl_memory_desc_t row_major, col_major;
  ASSERT_EQ(api->dnnl_memory_desc_init_by_tag(&row_major, 2, dims, dnnl_f32, dnnl_ab), dnnl_success);
  ASSERT_EQ(api->dnnl_memory_desc_init_by_tag(&col_major, 2, dims, dnnl_f32, dnnl_ba), dnnl_success);
  EXPECT_EQ(api->dnnl_memory_desc_get_size(&row_major), 6 * sizeof(float));
  dnnl_primitive_desc_t pd;
  ASSERT_EQ(api->dnnl_reorder_primitive_desc_create(&pd, &row_major, api->engine, &col_major, api->engine, nullptr),
            dnnl_success);
  dnnl_primitive_t reorder;
  ASSERT_EQ(api->dnnl_primitive_create(&reorder, pd), dnnl_success);
  float src[6] = {0, 1, 2, 3, 4, 5}, dst[6] = {};
  dnnl_memory_t from, to;
  ASSERT_EQ(api->dnnl_memory_create(&from, &row_major, api->engine, src), dnnl_success);
  ASSERT_EQ(api->dnnl_memory_create(&to, &col_major, api->engine, dst), dnnl_success);
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  ASSERT_EQ(api->dnnl_primitive_execute(reorder, ThisThreadStream(*api), 2, args), dnnl_success);
  const float expected[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dst[i], expected[i]) << i;
  api->dnnl_memory_destroy(from);
  api->dnnl_memory_destroy(to);
  api->dnnl_primitive_destroy(reorder);
  api->dnnl_primitive_desc_destroy(pd);
}
#endif

}  // namespace
}  // namespace kiln::onednn
