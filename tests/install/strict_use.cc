// Compiled (not linked) by the consumer with strict warnings as errors
// (tests/install/CMakeLists.txt): the public headers' templates and inline
// functions, instantiated the ways the header comments and docs show, must
// not make a strict user's build fail.
#include <depengine/engine.h>
#include <depengine/executor.h>
#include <depengine/ndarray.h>
#include <depengine/operator.h>
#include <depengine/optimizer.h>
#include <depengine/parameter.h>
#include <depengine/profiler.h>
#include <depengine/resource.h>
#include <depengine/simple_op.h>
#include <depengine/tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace depengine;

// parameter.h's example, with a field of every supported type.
struct StrictParam {
  TShape kernel;
  int pool_type = 0;
  float lr = 0;
  double wd = 0;
  bool flag = false;
  std::string name;
  std::uint32_t count = 0;
  std::int64_t limit = 0;
  static const ParamSchema<StrictParam>& Schema() {
    static const ParamSchema<StrictParam> schema = [] {
      ParamSchema<StrictParam> s;
      s.Field("kernel", &StrictParam::kernel).describe("pooling window (h,w)");
      s.Field("pool_type", &StrictParam::pool_type)
          .add_enum("max", 0)
          .add_enum("avg", 1)
          .set_default(0);
      s.Field("lr", &StrictParam::lr).set_range(0.0f, 1.0f).set_default(0.1f);
      s.Field("wd", &StrictParam::wd).set_finite().set_default(0.0);
      s.Field("flag", &StrictParam::flag).set_default(false);
      s.Field("name", &StrictParam::name).set_default("x");
      s.Field("count", &StrictParam::count).set_lower_bound(1u).set_default(3u);
      s.Field("limit", &StrictParam::limit).set_upper_bound(100).set_default(1);
      return s;
    }();
    return schema;
  }
};

}  // namespace

std::size_t StrictUse() {
  using namespace depengine;
  StrictParam p;
  StrictParam::Schema().Init(&p, {{"kernel", "(2,2)"}}, "Pooling");
  const std::map<std::string, std::string> fields = StrictParam::Schema().ToMap(p);

  const std::vector<TShape::index_t> dims = {2, 3};
  const TShape shape(dims.begin(), dims.end());
  const std::size_t bytes = SwitchType(kFloat64, [](auto tag) { return sizeof(tag); });
  float out = 0;
  Assign(out, kAddTo, 2.0f);

  NDArray a(shape, Context::CPU(), nullptr, kFloat64);
  const std::vector<double> values = a.ToVector<double>();
  RandomGenerator random(1);
  float uniform[4];
  random.SampleUniform(uniform, 4, 0.0f, 1.0f);
  double gaussian[4];
  random.SampleGaussian(gaussian, 4, 0.0, 1.0);
  random.SampleBernoulli(uniform, 4, 0.5);
  TBlob blob(uniform, TShape({4}), kFloat32);
  const float* data = blob.dptr<const float>();

  auto fc = OperatorProperty::Create("FullyConnected");
  const std::vector<int> inputs = fc->BackwardInputs<int>({1}, {2}, {3});
  return fields.size() + bytes + values.size() + inputs.size() + (data[0] + out > 0 ? 1 : 0);
}
