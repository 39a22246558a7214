// Random numbers of the `xhal` PyTorch device: a counter-based generator (Philox4x32-10, as
// CUDA's), its state a seed and an offset, and the random operators as kernels of
// kernels/random.wgsl, so every xhal device draws the same bits for a seed. Random operators
// without a kernel run on the CPU through the fallback with a CPU generator seeded from the
// xhal generator's stream, so they too follow torch.manual_seed (random_fallback_generators).

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Operators.h>
#include <ATen/core/DistributionsHelper.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "ops.h"

namespace xhal_torch {

namespace {

constexpr const char* kRandom = "random.wgsl";

uint64_t round_up_to_block(uint64_t words) { return (words + 3) / 4 * 4; }

}  // namespace

// --- The generator -----------------------------------------------------------------------------

PhiloxGenerator::PhiloxGenerator(c10::DeviceIndex index, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {
  set_current_seed(seed);
}

void PhiloxGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t PhiloxGenerator::seed() {
  const uint64_t fresh = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(fresh);
  return fresh;
}

void PhiloxGenerator::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "xhal: a generator's offset counts 32-bit words in whole Philox blocks of 4; ", offset,
              " is not a multiple of 4");
  offset_ = offset;
}

// The state as CUDA's generator has it: the seed, then the offset, each 8 bytes, little-endian.
c10::intrusive_ptr<c10::TensorImpl> PhiloxGenerator::get_state() const {
  auto state = at::empty({kStateSize}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  auto* bytes = state.data_ptr<uint8_t>();
  std::memcpy(bytes, &seed_, 8);
  std::memcpy(bytes + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

void PhiloxGenerator::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.device().is_cpu(),
              "xhal: a generator's state is a CPU tensor of uint8 (get_rng_state's), got one of ", state.dtype(),
              " on ", state.device());
  TORCH_CHECK(state.numel() == kStateSize, "xhal: a generator's state is ", kStateSize,
              " bytes (its seed and offset, 8 bytes each), got ", state.numel());
  const auto* bytes = static_cast<const uint8_t*>(state.data());
  uint64_t seed = 0, offset = 0;
  std::memcpy(&seed, bytes, 8);
  std::memcpy(&offset, bytes + 8, 8);
  TORCH_CHECK(offset % 4 == 0, "xhal: a generator state's offset (", offset, ") is not a multiple of 4");
  seed_ = seed;
  offset_ = offset;
}

PhiloxGenerator* PhiloxGenerator::clone_impl() const {
  auto* copy = new PhiloxGenerator(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

namespace {
std::mutex g_capture_mutex;
CapturedDraws* g_capture = nullptr;
}  // namespace

void capture_draws(CapturedDraws* draws) {
  std::lock_guard<std::mutex> lock(g_capture_mutex);
  // Draws are laid out for one graph's replays; a second capture under way would take them.
  TORCH_CHECK(draws == nullptr || g_capture == nullptr || g_capture == draws,
              "xhal: another graph is capturing (on xhal:", g_capture == nullptr ? -1 : g_capture->device,
              "); xhal captures one graph at a time: end that capture first");
  g_capture = draws;
}

bool capturing_draws() {
  std::lock_guard<std::mutex> lock(g_capture_mutex);
  return g_capture != nullptr;
}

PhiloxGenerator::Reservation PhiloxGenerator::reserve(uint64_t words) {
  {
    std::lock_guard<std::mutex> capture_lock(g_capture_mutex);
    if (g_capture != nullptr) {
      // Laid out from the replay's first block as eager draws are from the offset.
      for (CapturedGenerator& captured : g_capture->generators) {
        if (captured.generator.get() != this) continue;
        Reservation r{0, captured.words / 4, captured.state};
        captured.words += round_up_to_block(words);
        return r;
      }
      TORCH_CHECK(device().index() == g_capture->device, "xhal: a graph captured on xhal:", g_capture->device,
                  " cannot draw from a generator of xhal:", device().index());
      CapturedGenerator captured;
      captured.generator = c10::intrusive_ptr<PhiloxGenerator>::reclaim_copy(this);
      check(xhal_buffer_alloc(xhal_torch::device(g_capture->device).device, 16, &captured.state),
            "allocate a captured generator's state");
      captured.words = round_up_to_block(words);
      g_capture->generators.push_back(captured);
      return Reservation{0, 0, captured.state};
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Reservation r{seed_, offset_ / 4};
  offset_ += round_up_to_block(words);
  return r;
}

std::pair<uint64_t, uint64_t> PhiloxGenerator::advance(uint64_t words) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::pair<uint64_t, uint64_t> at{seed_, offset_};
  offset_ += words;
  return at;
}

namespace {

std::mutex g_generators_mutex;
std::vector<at::Generator>& default_generators() {
  static auto* generators = new std::vector<at::Generator>();
  return *generators;
}
// Seeds given before the default generators exist: they start from them (seed_all's, then a
// device's own).
std::optional<uint64_t> g_pending_seed;
std::map<int, uint64_t> g_pending_device_seeds;

}  // namespace

void seed_device(int index, uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_generators_mutex);
  auto& generators = default_generators();
  if (generators.empty()) {
    g_pending_device_seeds[index] = seed;
    return;
  }
  TORCH_CHECK(index >= 0 && index < static_cast<int>(generators.size()), "xhal: device xhal:", index,
              " does not exist; there are ", generators.size());
  std::lock_guard<std::mutex> generator_lock(generators[index].mutex());
  generators[index].set_current_seed(seed);
}

void seed_all(uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_generators_mutex);
  auto& generators = default_generators();
  if (generators.empty()) {
    g_pending_seed = seed;
    g_pending_device_seeds.clear();
    return;
  }
  for (auto& generator : generators) {
    std::lock_guard<std::mutex> generator_lock(generator.mutex());
    generator.set_current_seed(seed);
  }
}

const at::Generator& default_generator(int index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "xhal: device xhal:", index, " does not exist; there are ",
              device_count());
  std::lock_guard<std::mutex> lock(g_generators_mutex);
  auto& generators = default_generators();
  if (generators.empty()) {
    for (int i = 0; i < device_count(); i++) {
      auto pending = g_pending_device_seeds.find(i);
      const uint64_t seed = pending != g_pending_device_seeds.end() ? pending->second
                                                                    : g_pending_seed.value_or(c10::default_rng_seed_val);
      generators.push_back(at::make_generator<PhiloxGenerator>(static_cast<c10::DeviceIndex>(i), seed));
    }
  }
  return generators[index];
}

at::Generator new_generator(int index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "xhal: device xhal:", index, " does not exist; there are ",
              device_count());
  return at::make_generator<PhiloxGenerator>(static_cast<c10::DeviceIndex>(index));
}

// --- Philox on the host ------------------------------------------------------------------------

std::array<uint32_t, 4> philox_block(uint64_t seed, uint64_t block) {
  uint32_t c[4] = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0};
  uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  for (int round = 0; round < 10; round++) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
                              static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    std::memcpy(c, next, sizeof c);
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return {c[0], c[1], c[2], c[3]};
}

namespace {

// The generator of a random operator on `t`: the one given (of an xhal device), or its device's
// default.
PhiloxGenerator* generator_of(const std::optional<at::Generator>& given, const at::Tensor& t) {
  const int index = t.device().index() < 0 ? current_device() : t.device().index();
  if (given.has_value() && given->defined()) {
    TORCH_CHECK(given->device().type() == c10::DeviceType::PrivateUse1, "xhal: a random operator on ", t.device(),
                " draws from a generator of an xhal device (torch.Generator(device=\"xhal\")), not of ",
                given->device());
    return at::check_generator<PhiloxGenerator>(given);
  }
  return at::check_generator<PhiloxGenerator>(default_generator(index));
}

// Runs `check` on a one-element CPU tensor of `t`'s dtype with a throwaway generator: PyTorch's
// own checks of a random operator's arguments and dtype, with its messages, before the device
// draws (a zero-element tensor would return before them).
template <typename Check>
void check_like_cpu(const at::Tensor& t, Check&& check) {
  at::Tensor probe = at::empty({1}, t.options().device(at::kCPU));
  at::Generator throwaway = at::make_generator<at::CPUGeneratorImpl>(0);
  check(probe, throwaway);
}

// The immediate block of kernels/random.wgsl (struct Draw).
struct DrawLayout {
  uint32_t key[2] = {};
  uint32_t block[2] = {};
  uint32_t count = 0, out_offset = 0, p_offset = 0, pad = 0;
  uint32_t a[2] = {};
  uint32_t b[2] = {};
};
static_assert(sizeof(DrawLayout) == 48, "the WGSL struct Draw is 48 bytes");

void set_words(uint32_t (&to)[2], uint64_t bits) {
  to[0] = static_cast<uint32_t>(bits);
  to[1] = static_cast<uint32_t>(bits >> 32);
}

// The largest tensor one draw covers: element indices are 32-bit in the kernels.
constexpr int64_t kMaxDraw = std::numeric_limits<uint32_t>::max() - 4;

const Kernel& random_kernel(Device& dev, const char* entry, uint32_t op, at::ScalarType element,
                            const PhiloxGenerator::Reservation& reservation, at::ScalarType integer = at::kInt) {
  const bool wide = element == at::kDouble || (std::strcmp(entry, "draw_integers") == 0 && integer == at::kLong);
  const bool from_state = reservation.state != nullptr;
  const std::string key = std::string("random|") + entry + "|" + std::to_string(op) + "|" +
                          wgsl_type(element) + "|" + wgsl_type(integer) + (from_state ? "|graph" : "");
  return recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {kRandom};
    recipe.types = {{"E", wgsl_type(element)}, {"F", wgsl_type(float_compute(element))}, {"I", wgsl_type(integer)}};
    recipe.overrides = {{"OP", static_cast<double>(op)}, {"WORDS", wide ? 2.0 : 1.0}, {"FROM_STATE", from_state ? 1.0 : 0.0}};
    recipe.entry = entry;
    return recipe;
  });
}

// A draw's bindings: the graph state (or the placeholder) at 0, then the ones it uses.
struct DrawBindings {
  Binding at[7];
  DrawBindings(Device& dev, const PhiloxGenerator::Reservation& reservation) {
    for (Binding& b : at) b = Binding{dev.placeholder};
    if (reservation.state != nullptr) at[0] = Binding{reservation.state};
  }
};

void set_reservation(DrawLayout& layout, const PhiloxGenerator::Reservation& reservation) {
  set_words(layout.key, reservation.seed);
  set_words(layout.block, reservation.block);
}

// The dtype a floating draw into `t` computes in on its device: its own when the device has
// kernels for it, else float32.
at::ScalarType draw_dtype(const at::Tensor& t) {
  const at::ScalarType dtype = t.scalar_type();
  if ((dtype == at::kFloat || dtype == at::kHalf || dtype == at::kDouble) && on_device(t, dtype)) return dtype;
  return at::kFloat;
}

// Fills `self` with draws of distribution `op` (random.wgsl's OP_ constants) with parameters a
// and b, and p (OP_BERNOULLI_TENSOR: same shape as self).
void draw_into(at::Tensor& self, const char* op_name, double a, double b, const at::Tensor& p,
               PhiloxGenerator* generator) {
  if (self.numel() == 0) return;
  const at::ScalarType dtype = draw_dtype(self);
  if (dtype != self.scalar_type() || !self.is_contiguous() || self.numel() > kMaxDraw) {
    TORCH_CHECK(self.numel() <= kMaxDraw, "xhal: a random draw covers at most ", kMaxDraw, " elements; got ",
                self.numel());
    at::Tensor drawn = at::empty(self.sizes(), self.options().dtype(dtype));
    draw_into(drawn, op_name, a, b, p, generator);
    at::Tensor narrowed = drawn.to(self.scalar_type());
    // A value next to b may round to it in a narrower dtype; the interval excludes it.
    if (std::strcmp(op_name, "OP_UNIFORM") == 0 && b > a) narrowed.masked_fill_(narrowed.ge(b), a);
    self.copy_(narrowed);
    return;
  }
  const uint32_t op = kernel_constant(kRandom, op_name);
  const bool wide = dtype == at::kDouble;
  const auto count = static_cast<uint64_t>(self.numel());
  at::Tensor probabilities;
  if (p.defined()) probabilities = p.to(self.options()).expand(self.sizes()).contiguous();
  const auto reservation = generator->reserve(count * (wide ? 2 : 1));
  DrawLayout layout;
  set_reservation(layout, reservation);
  layout.count = static_cast<uint32_t>(count);
  layout.out_offset = element_offset(self);
  set_words(layout.a, scalar_bits(a, dtype));
  set_words(layout.b, scalar_bits(b, dtype));
  Device& dev = device(self.device().index());
  DrawBindings bindings(dev, reservation);
  bindings.at[1] = Binding{place_of(self).buffer};
  if (probabilities.defined()) {
    layout.p_offset = element_offset(probabilities);
    bindings.at[2] = Binding{place_of(probabilities).buffer};
  }
  launch(dev, random_kernel(dev, "draw", op, dtype, reservation), bindings.at, (count + 3) / 4, &layout, sizeof layout);
}

// Fills `self` with integers from `start` to start + range - 1 (range 0: every 64-bit value).
void draw_integers_into(at::Tensor& self, int64_t start, uint64_t range, PhiloxGenerator* generator) {
  if (self.numel() == 0) return;
  const at::ScalarType dtype = self.scalar_type();
  const bool fits_int32 = start >= std::numeric_limits<int32_t>::min() &&
                          start <= std::numeric_limits<int32_t>::max() && range != 0 &&
                          range - 1 <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max() - start);
  at::ScalarType integer = dtype;
  if (dtype != at::kInt && dtype != at::kLong) integer = fits_int32 ? at::kInt : at::kLong;
  if (integer == at::kLong && !on_device(self, at::kLong)) integer = at::kInt;
  TORCH_CHECK(integer == at::kLong || dtype == at::kInt || fits_int32, "xhal: random integers beyond 32 bits need the ",
              "device's i64 feature, which ", device(self.device().index()).label, " lacks");
  if (integer != dtype || !self.is_contiguous() || self.numel() > kMaxDraw) {
    TORCH_CHECK(self.numel() <= kMaxDraw, "xhal: a random draw covers at most ", kMaxDraw, " elements; got ",
                self.numel());
    at::Tensor drawn = at::empty(self.sizes(), self.options().dtype(integer));
    draw_integers_into(drawn, start, range, generator);
    self.copy_(drawn);
    return;
  }
  const bool wide = integer == at::kLong;
  const auto count = static_cast<uint64_t>(self.numel());
  const auto reservation = generator->reserve(count * (wide ? 2 : 1));
  DrawLayout layout;
  set_reservation(layout, reservation);
  layout.count = static_cast<uint32_t>(count);
  layout.out_offset = element_offset(self);
  set_words(layout.a, static_cast<uint64_t>(start));
  set_words(layout.b, wide ? range : (range >= (uint64_t{1} << 32) ? 0 : range));
  Device& dev = device(self.device().index());
  DrawBindings bindings(dev, reservation);
  bindings.at[4] = Binding{place_of(self).buffer};
  launch(dev, random_kernel(dev, "draw_integers", 0, at::kFloat, reservation, integer), bindings.at, (count + 3) / 4,
         &layout, sizeof layout);
}

// --- The operators -----------------------------------------------------------------------------

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.uniform_(from, to, g); });
  // A complex tensor draws its real and imaginary parts alike, as PyTorch's CPU does.
  at::Tensor parts = self.is_complex() ? at::view_as_real(self) : self;
  draw_into(parts, "OP_UNIFORM", from, to, {}, generator_of(gen, self));
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.normal_(mean, std, g); });
  // A complex normal value's parts each have variance std^2 / 2, as on PyTorch's CPU.
  at::Tensor parts = self.is_complex() ? at::view_as_real(self) : self;
  draw_into(parts, "OP_NORMAL", mean, self.is_complex() ? std / std::sqrt(2.0) : std, {}, generator_of(gen, self));
  return self;
}

void check_std(const at::Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  if (std.numel() > 0) {
    TORCH_CHECK(std.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
  }
}

// out = mean + std * n, mean and std broadcast.
at::Tensor& normal_scaled_out(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen,
                              at::Tensor& out) {
  prepare_out(out, broadcast_shape({mean, std}));
  draw_into(out, "OP_NORMAL", 0.0, 1.0, {}, generator_of(gen, out));
  out.mul_(std).add_(mean);
  return out;
}

at::Tensor& normal_tensor_float_out(const at::Tensor& mean, double std, std::optional<at::Generator> gen,
                                    at::Tensor& out) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return normal_scaled_out(mean, at::scalar_tensor(std, mean.options()), gen, out);
}

at::Tensor& normal_float_tensor_out(double mean, const at::Tensor& std, std::optional<at::Generator> gen,
                                    at::Tensor& out) {
  check_std(std);
  return normal_scaled_out(at::scalar_tensor(mean, std.options()), std, gen, out);
}

at::Tensor& normal_tensor_tensor_out(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen,
                                     at::Tensor& out) {
  check_std(std);
  return normal_scaled_out(mean, std, gen, out);
}

at::Tensor normal_tensor_float(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, mean.options());
  return normal_tensor_float_out(mean, std, gen, out);
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, std.options());
  return normal_float_tensor_out(mean, std, gen, out);
}

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, at::TensorOptions(mean.options()).dtype(at::result_type(mean, std)));
  return normal_tensor_tensor_out(mean, std, gen, out);
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.bernoulli_(p, g); });
  draw_into(self, "OP_BERNOULLI", p, 0.0, {}, generator_of(gen, self));
  return self;
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) {
    probe.bernoulli_(at::full({1}, 0.5, p.options().device(at::kCPU)), g);
  });
  TORCH_CHECK(at::is_expandable_to(p.sizes(), self.sizes()), "xhal: bernoulli_'s probabilities of shape ", p.sizes(),
              " do not broadcast to the tensor's shape ", self.sizes());
  if (p.numel() > 0) {
    // A probability outside [0, 1] (or NaN) has no meaning: PyTorch's CPU refuses it too.
    TORCH_CHECK(p.ge(0).logical_and(p.le(1)).all().item<bool>(), "bernoulli_ expects p to be in [0, 1], but got ",
                "a probability outside it (or NaN)");
  }
  draw_into(self, "OP_BERNOULLI_TENSOR", 0.0, 0.0, p, generator_of(gen, self));
  return self;
}

at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  prepare_out(out, self.sizes());
  return bernoulli_tensor_(out, self, gen);
}

at::Tensor& exponential_(at::Tensor& self, double rate, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.exponential_(rate, g); });
  draw_into(self, "OP_EXPONENTIAL", rate, 0.0, {}, generator_of(gen, self));
  return self;
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.cauchy_(median, sigma, g); });
  draw_into(self, "OP_CAUCHY", median, sigma, {}, generator_of(gen, self));
  return self;
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.log_normal_(mean, std, g); });
  draw_into(self, "OP_LOG_NORMAL", mean, std, {}, generator_of(gen, self));
  return self;
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.geometric_(p, g); });
  draw_into(self, "OP_GEOMETRIC", p, 0.0, {}, generator_of(gen, self));
  return self;
}

// random_'s bounds as PyTorch has them: [0, 2^digits] for floating dtypes, [0, max] for integers.
uint64_t random_range_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return (uint64_t{1} << std::numeric_limits<float>::digits) + 1;
    case at::kDouble:
      return (uint64_t{1} << std::numeric_limits<double>::digits) + 1;
    case at::kHalf:
      return (uint64_t{1} << 11) + 1;
    case at::kBFloat16:
      return (uint64_t{1} << 8) + 1;
    case at::kBool:
      return 2;
    case at::kByte:
      return 256;
    case at::kChar:
      return 128;
    case at::kShort:
      return 32768;
    case at::kInt:
      return uint64_t{1} << 31;
    case at::kLong:
      return uint64_t{1} << 63;
    default:
      TORCH_CHECK(false, "random_ is not implemented for ", dtype);
  }
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.random_(g); });
  draw_integers_into(self, 0, random_range_of(self.scalar_type()), generator_of(gen, self));
  return self;
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  check_like_cpu(self, [&](at::Tensor& probe, at::Generator& g) { probe.random_(from, to, g); });
  // Without `to`, up to the dtype's largest value (or 2^digits of a floating dtype), inclusive.
  const uint64_t range = to.has_value() ? static_cast<uint64_t>(*to) - static_cast<uint64_t>(from)
                                        : random_range_of(self.scalar_type()) - static_cast<uint64_t>(from);
  draw_integers_into(self, from, range, generator_of(gen, self));
  return self;
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from_(self, 0, to, gen);
}

// Dropout: the output and the mask of the elements kept (each with probability 1 - p), the
// kept ones scaled by 1 / (1 - p).
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0) return {input, at::empty_like(input, input.options().dtype(at::kBool))};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1.0 - p;
  const double scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  const at::ScalarType dtype = draw_dtype(input);
  if (dtype != input.scalar_type() || input.numel() > kMaxDraw) {
    // A dtype without kernels: the mask from a Bernoulli draw, the product on the device.
    at::Tensor kept = at::empty(input.sizes(), input.options().dtype(at::kFloat));
    draw_into(kept, "OP_BERNOULLI", keep, 0.0, {}, generator_of(std::nullopt, input));
    mask.copy_(kept);
    return {input * mask * scale, mask};
  }
  const at::Tensor x = input.contiguous();
  at::Tensor out = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  const auto count = static_cast<uint64_t>(x.numel());
  const auto reservation = generator_of(std::nullopt, input)->reserve(count * (dtype == at::kDouble ? 2 : 1));
  DrawLayout layout;
  set_reservation(layout, reservation);
  layout.count = static_cast<uint32_t>(count);
  layout.out_offset = element_offset(out);
  layout.p_offset = element_offset(x);
  set_words(layout.a, scalar_bits(keep, dtype));
  set_words(layout.b, scalar_bits(scale, dtype));
  Device& dev = device(input.device().index());
  DrawBindings bindings(dev, reservation);
  bindings.at[1] = Binding{place_of(out).buffer};
  bindings.at[2] = Binding{place_of(x).buffer};
  bindings.at[3] = Binding{place_of(mask).buffer};
  launch(dev, random_kernel(dev, "dropout", 0, dtype, reservation), bindings.at, (count + 3) / 4, &layout,
         sizeof layout);
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  return grad_output * mask * scale;
}

// A random permutation: Fisher-Yates on the host, each swap's index from the generator's
// stream (one word per step, as a draw of n elements), then one copy to the device. The
// permutation is sequential work, and the same words on every device give the same one.
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(n <= kMaxDraw, "xhal: randperm draws at most ", kMaxDraw, " elements; got ", n);
  TORCH_CHECK(static_cast<uint64_t>(n) <= random_range_of(out.scalar_type()), "n is too large for result tensor type: '",
              out.scalar_type(), "'");
  prepare_out(out, {n});
  if (n == 0) return out;
  TORCH_CHECK(!capturing_draws(), "xhal: randperm shuffles on the host, which a graph capture cannot record; make the "
                                   "permutation outside the captured region and pass it in");
  PhiloxGenerator* generator = generator_of(gen, out);
  const auto [seed, first, state] = generator->reserve(static_cast<uint64_t>(n));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) order[i] = i;
  std::array<uint32_t, 4> words{};
  for (int64_t i = n - 1; i > 0; i--) {
    const auto position = static_cast<uint64_t>(n - 1 - i);
    if (position % 4 == 0) words = philox_block(seed, first + position / 4);
    // An index in [0, i] from 64 bits of the word's product, nearly free of modulo bias.
    const uint64_t j = (static_cast<uint64_t>(words[position % 4]) * static_cast<uint64_t>(i + 1)) >> 32;
    std::swap(order[i], order[j]);
  }
  at::Tensor host = at::from_blob(order.data(), {n}, at::TensorOptions().dtype(at::kLong)).to(out.scalar_type());
  out.copy_(host);
  return out;
}

void check_probabilities(const at::Tensor& self, int64_t samples, bool replacement) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(samples > 0, "cannot sample n_sample <= 0 samples");
  const int64_t categories = self.size(-1);
  TORCH_CHECK(replacement || samples <= categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  if (self.numel() == 0) return;
  const at::Tensor usable = self.isfinite().logical_and(self.ge(0)).all();
  TORCH_CHECK(usable.item<bool>(), "probability tensor contains either `inf`, `nan` or element < 0");
  const at::Tensor rows = self.dim() == 1 ? self.unsqueeze(0) : self;
  TORCH_CHECK(rows.sum(-1).gt(0).all().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
  if (!replacement) {
    const int64_t fewest = rows.ne(0).sum(-1).min().item<int64_t>();
    TORCH_CHECK(fewest >= samples,
                "invalid multinomial distribution (with replacement=False, not enough non-negative category to sample)");
  }
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t samples, bool replacement, std::optional<at::Generator> gen,
                            at::Tensor& out) {
  check_probabilities(self, samples, replacement);
  const bool vector = self.dim() == 1;
  const at::Tensor rows = vector ? self.unsqueeze(0) : self;
  const int64_t row_count = rows.size(0), categories = rows.size(1);
  prepare_out(out, vector ? at::IntArrayRef{samples} : at::IntArrayRef{row_count, samples});
  if (out.numel() == 0) return out;
  PhiloxGenerator* generator = generator_of(gen, self);
  if (!replacement) {
    // The k largest p / e, e exponential draws: a sample without replacement (the exponential
    // race, as PyTorch's CPU kernel draws it).
    at::Tensor race = at::empty(rows.sizes(), rows.options());
    draw_into(race, "OP_EXPONENTIAL", 1.0, 0.0, {}, generator);
    at::Tensor chosen = std::get<1>(at::topk(rows / race, samples, -1, true, true));
    out.copy_(vector ? chosen.squeeze(0) : chosen);
    return out;
  }
  const at::ScalarType dtype = draw_dtype(rows);
  const at::Tensor cumulative = rows.to(dtype).cumsum(-1).contiguous();
  at::Tensor chosen = at::empty({row_count, samples}, rows.options().dtype(at::kLong));
  const auto count = static_cast<uint64_t>(chosen.numel());
  TORCH_CHECK(count <= static_cast<uint64_t>(kMaxDraw), "xhal: multinomial draws at most ", kMaxDraw,
              " samples at once; got ", count);
  const auto reservation = generator->reserve(count * (dtype == at::kDouble ? 2 : 1));
  DrawLayout layout;
  set_reservation(layout, reservation);
  layout.count = static_cast<uint32_t>(count);
  layout.p_offset = element_offset(cumulative);
  layout.a[0] = static_cast<uint32_t>(samples);
  layout.b[0] = static_cast<uint32_t>(categories);
  Device& dev = device(self.device().index());
  DrawBindings bindings(dev, reservation);
  bindings.at[5] = Binding{place_of(cumulative).buffer};
  bindings.at[6] = Binding{place_of(chosen).buffer};
  launch(dev, random_kernel(dev, "sample_categories", 0, dtype, reservation), bindings.at, (count + 3) / 4, &layout,
         sizeof layout);
  out.copy_(vector ? chosen.squeeze(0) : chosen);
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t samples, bool replacement, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, samples, replacement, gen, out);
}

}  // namespace

// Random operators without a kernel run on the CPU with a CPU generator seeded from the xhal
// generator's next block, given or the device's default: reproducible under torch.manual_seed,
// and the same on every xhal device. A CPU generator given to an operator on xhal tensors is
// refused, as PyTorch refuses a mismatched generator.
void random_fallback_generators(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  int index = -1;
  for (size_t i = 0; i < arguments.size() && index < 0; i++) {
    const c10::IValue& value = (*stack)[first + i];
    if (value.isTensor() && value.toTensor().defined() && value.toTensor().device().type() == c10::DeviceType::PrivateUse1)
      index = value.toTensor().device().index();
  }
  for (size_t i = 0; i < arguments.size(); i++) {
    const auto& type = arguments[i].type();
    const bool generator_argument =
        type->kind() == c10::TypeKind::GeneratorType ||
        (type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType);
    if (!generator_argument) continue;
    c10::IValue& value = (*stack)[first + i];
    at::Generator given = value.isGenerator() ? value.toGenerator() : at::Generator();
    if (given.defined() && given.device().type() != c10::DeviceType::PrivateUse1) {
      if (index < 0) continue;  // an operator on CPU tensors with a CPU generator
      TORCH_CHECK(false, "xhal: ", op.schema().name(), " on xhal tensors draws from a generator of an xhal device ",
                  "(torch.Generator(device=\"xhal\")), not of ", given.device());
    }
    TORCH_CHECK(!capturing_draws(), "xhal: ", op.schema().name(), " has no xhal kernel and runs on the CPU, which a ",
                "graph capture cannot record; draw its numbers outside the captured region");
    PhiloxGenerator* source = given.defined() ? at::check_generator<PhiloxGenerator>(given)
                                              : at::check_generator<PhiloxGenerator>(default_generator(
                                                    index >= 0 ? index : current_device()));
    const auto [seed, block, state] = source->reserve(4);
    const auto words = philox_block(seed, block);
    const uint64_t cpu_seed = (static_cast<uint64_t>(words[1]) << 32) | words[0];
    value = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(cpu_seed));
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("normal.Tensor_float", normal_tensor_float);
  m.impl("normal.Tensor_float_out", normal_tensor_float_out);
  m.impl("normal.float_Tensor", normal_float_tensor);
  m.impl("normal.float_Tensor_out", normal_float_tensor_out);
  m.impl("normal.Tensor_Tensor", normal_tensor_tensor);
  m.impl("normal.Tensor_Tensor_out", normal_tensor_tensor_out);
  m.impl("bernoulli_.float", bernoulli_float_);
  m.impl("bernoulli_.Tensor", bernoulli_tensor_);
  m.impl("bernoulli.out", bernoulli_out);
  m.impl("exponential_", exponential_);
  m.impl("cauchy_", cauchy_);
  m.impl("log_normal_", log_normal_);
  m.impl("geometric_", geometric_);
  m.impl("random_", random_);
  m.impl("random_.from", random_from_);
  m.impl("random_.to", random_to_);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
  m.impl("randperm.generator_out", randperm_out);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
}

}  // namespace xhal_torch
