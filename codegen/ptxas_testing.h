// codegen/ptxas_testing.h: the GPU code generators' tests assemble their PTX with the local ptxas
// (the CUDA toolkit is part of the build machine; no GPU is needed), for sm_90 as nvJitLink does.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln::codegen {

inline std::string Ptxas() {
  for (const char* p : {"/usr/local/cuda-13.0/bin/ptxas", "/usr/local/cuda/bin/ptxas", "/usr/local/bin/ptxas"})
    if (std::ifstream(p).good()) return p;
  return "";
}

// ptxas -arch=sm_90 -v on the PTX; returns its report (registers, spills), failing the test on error
// or when the kernel uses local memory or spills.
inline std::string Assemble(const std::string& ptx, const std::string& tag) {
  std::string ptxas = Ptxas();
  if (ptxas.empty()) {
    ADD_FAILURE() << "no ptxas: the CUDA toolkit (/usr/local/cuda-13.0) is part of the build machine";
    return "";
  }
  std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::string in = dir + "/" + tag + ".ptx", out = dir + "/" + tag + ".cubin", log = dir + "/" + tag + ".log";
  std::ofstream(in) << ptx;
  std::string cmd = ptxas + " -arch=sm_90 -v -o " + out + " " + in + " > " + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::stringstream report;
  report << std::ifstream(log).rdbuf();
  EXPECT_EQ(rc, 0) << tag << ": ptxas failed:\n" << report.str() << "\n" << ptx;
  EXPECT_NE(report.str().find("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), std::string::npos)
      << tag << ": local memory or spills:\n" << report.str();
  return report.str();
}

}  // namespace kiln::codegen
