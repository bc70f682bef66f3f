// codegen/nvptx_emit.h: a PointwiseKernel -> one NVPTX kernel function in `m` (Note [Pointwise
// kernel shape] in nvptx_emit.cc), unoptimised, with its nvvm.annotations. Internal to
// :nvptx_codegen, which validates, links libdevice, optimises and writes PTX.
#pragma once

#include <string>

#include "codegen/nvptx_codegen.h"
#include "llvm/IR/Module.h"

namespace kiln::codegen {

llvm::Function* EmitPointwise(llvm::Module& m, const PointwiseKernel& k, const PointwiseLayout& layout,
                              const std::string& symbol);

}  // namespace kiln::codegen
