// Helpers shared by the built-in operators: a property base that parses a
// parameter struct, and row-major GEMM through OpenBLAS.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "depengine/operator.h"

namespace depengine::op {

// An OperatorProperty whose parameters are the struct Param (with a static
// Schema()), registered under Derived::kName. Derived implements the rest.
template <class Derived, class Param>
class ParamProperty : public OperatorProperty {
 public:
  void Init(const KwArgs& kwargs) override {
    Param::Schema().Init(&param_, kwargs, Derived::kName);
    static_cast<Derived*>(this)->Validate();
  }
  std::map<std::string, std::string> GetParams() const override {
    return Param::Schema().ToMap(param_);
  }
  std::unique_ptr<OperatorProperty> Copy() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  std::string TypeString() const override { return Derived::kName; }
  const Param& param() const { return param_; }

 protected:
  // Checks between parameters after parsing; raises ParamError. Optional.
  void Validate() {}
  Param param_{};
};

// C = alpha * op(A) * op(B) + beta * C, row-major, op = transpose when
// the flag is set; A is MxK after op, B is KxN after op, C is MxN.
void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);
void Gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc);

// Sets OpenBLAS to one thread, once, unless OPENBLAS_NUM_THREADS is set:
// the engine's workers already run operators in parallel, and BLAS threads
// inside them would compete for the same cores. Called on the user thread
// when an operator that uses BLAS is created.
void UseSingleThreadedBlas();

// The GEMM beta that realizes `req` on the output: 0 to overwrite, 1 to add.
inline double BetaFor(OpReqType req) { return req == kAddTo ? 1.0 : 0.0; }

}  // namespace depengine::op
