// Matrix products of the `xhal` PyTorch device (kernels/matmul.wgsl): mm, bmm, addmm,
// baddbmm, mv, addmv and dot, so matmul, linear and their backward passes.

#include <ATen/Operators.h>
#include <torch/library.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops.h"

namespace xhal_torch {
namespace {

// The immediate block of kernels/matmul.wgsl (struct Product).
struct Product {
  uint32_t batch = 1, m = 0, n = 0, k = 0;
  uint32_t offsets[4] = {};
  uint32_t a_strides[4] = {};
  uint32_t b_strides[4] = {};
  uint32_t bias_strides[4] = {};
  uint32_t scalars[4] = {};
  uint32_t batch_inner = 1, pad[3] = {};
};
static_assert(sizeof(Product) == 112, "the WGSL struct Product is 112 bytes");

xhal_buffer_t* buffer_or(const at::Tensor& t, xhal_buffer_t* placeholder) {
  xhal_buffer_t* buffer = place_of(t).buffer;
  return buffer == nullptr ? placeholder : buffer;  // an empty tensor has no memory
}

// The two tiled kernels of kernels/matmul.wgsl, which compute the same sums bit for bit:
// `tiled`, whose neighbouring invocations own neighbouring outputs (vector lanes on the cpu
// device), and `tiled_contiguous`, each invocation a contiguous 4x4 block in vec4s (a vector
// each on llvmpipe). Which is faster depends on how the device runs invocations.
enum class Tiles { Interleaved, Contiguous };

const char* tiles_name(Tiles tiles) { return tiles == Tiles::Interleaved ? "interleaved" : "contiguous"; }

void launch_tiled(Device& dev, Tiles tiles, at::ScalarType dtype, bool has_bias, const Product& q,
                  at::ArrayRef<Binding> bindings) {
  constexpr uint32_t kBlock = 64;  // kernels/matmul.wgsl's BLOCK
  // Rows an invocation of `tiled` computes (ROWS): a product with few rows (a convolution's 16
  // or 32 output channels) takes blocks of 16 or 32 rows rather than 64 mostly of padding.
  const uint32_t rows = tiles == Tiles::Contiguous ? 4 : q.m <= 16 ? 1 : q.m <= 32 ? 2 : 4;
  const std::string key = std::string("matmul|") + wgsl_type(dtype) + (has_bias ? "b" : "") + "|" + tiles_name(tiles) +
                          std::to_string(rows);
  const Kernel& compiled = recipe_kernel(dev, key, [&] {
    KernelRecipe recipe;
    recipe.files = {"matmul.wgsl"};
    recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(float_compute(dtype))}};
    recipe.overrides = {{"HAS_BIAS", has_bias ? 1.0 : 0.0}, {"ROWS", static_cast<double>(rows)}};
    recipe.entry = tiles == Tiles::Interleaved ? "tiled" : "tiled_contiguous";
    return recipe;
  });
  const uint32_t block_rows = 16 * rows;
  launch_workgroups(dev, compiled, bindings, {(q.n + kBlock - 1) / kBlock, (q.m + block_rows - 1) / block_rows, q.batch},
                    &q, sizeof q);
}

// Seconds `tiles` takes for an m x k by k x n float32 product of ones (three runs, after one to
// compile and warm up).
double time_tiles(Device& dev, Tiles tiles, uint32_t m, uint32_t n, uint32_t k) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(c10::Device(c10::DeviceType::PrivateUse1, dev.index));
  const at::Tensor a = at::ones({m, k}, options), b = at::ones({k, n}, options), out = at::empty({m, n}, options);
  Product q;
  q.m = m;
  q.n = n;
  q.k = k;
  q.a_strides[1] = k;
  q.b_strides[1] = n;
  q.a_strides[2] = q.b_strides[2] = 1;
  q.scalars[0] = static_cast<uint32_t>(scalar_bits(1.0, at::kFloat));
  const Binding bindings[4] = {Binding{place_of(a).buffer}, Binding{place_of(b).buffer}, Binding{dev.placeholder},
                               Binding{place_of(out).buffer}};
  xhal_stream_t* stream = current_xhal_stream(dev.index);
  launch_tiled(dev, tiles, at::kFloat, false, q, bindings);
  check(xhal_stream_synchronize(stream), "synchronize");
  const auto start = std::chrono::steady_clock::now();
  for (int run = 0; run < 3; run++) launch_tiled(dev, tiles, at::kFloat, false, q, bindings);
  check(xhal_stream_synchronize(stream), "synchronize");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 3;
}

// The tiled kernel for `dev`: XHAL_TORCH_MATMUL_TILES (`interleaved` or `contiguous`) when
// set; else the choice a tuning pass made on this device with this xhal version and this
// matmul.wgsl, kept on disk (tuning_cache.cpp); else a tuning pass now: both kernels timed on
// a square product and on a convolution's (32 output channels, a 32x32 image, 3x3 taps of 32
// channels), the faster in total kept for the process and on disk. Both give the same results,
// so the choice changes only the time. A graph capture cannot time anything (its work runs at
// replay): a product captured before the device's first eager one takes `tiled`, and the
// pass runs at the first product outside a capture.
Tiles tiles_for(Device& dev) {
  const int known = dev.matmul_tiles.load(std::memory_order_relaxed);
  if (known >= 0) return static_cast<Tiles>(known);
  const std::optional<size_t> answer = tuned_answer(
      dev, "XHAL_TORCH_MATMUL_TILES", {tiles_name(Tiles::Interleaved), tiles_name(Tiles::Contiguous)},
      tuning_question("matmul tiles", "matmul.wgsl"),
      [&] {
        const uint32_t shapes[2][3] = {{256, 256, 256}, {32, 1024, 288}};
        std::vector<double> total;
        for (Tiles candidate : {Tiles::Interleaved, Tiles::Contiguous}) {
          total.push_back(0);
          for (const auto& shape : shapes) total.back() += time_tiles(dev, candidate, shape[0], shape[1], shape[2]);
        }
        return total;
      },
      [](size_t k) {
        return std::string("runs matrix products with the ") + tiles_name(static_cast<Tiles>(k)) + " tiled kernel";
      });
  if (!answer) return Tiles::Interleaved;
  const Tiles tiles = static_cast<Tiles>(*answer);
  dev.matmul_tiles.store(static_cast<int>(tiles), std::memory_order_relaxed);
  return tiles;
}

// An operand's strides for kernels/matmul.wgsl: inner batch, row, column, outer batch (0 for a
// dimension of size 1, which broadcasts), for a 3- or 4-dimensional tensor.
void set_product_strides(uint32_t* strides, const at::Tensor& t) {
  const int64_t r = t.dim() - 2;
  auto stride = [&](int64_t d) { return static_cast<uint32_t>(t.size(d) == 1 ? 0 : t.stride(d)); };
  strides[0] = t.dim() == 4 ? stride(1) : 0;
  strides[1] = stride(r);
  strides[2] = stride(r + 1);
  strides[3] = stride(0);
}

// out[b] = beta * bias[b] + alpha * a[b] @ b[b], for a, b and out of 3 dimensions (one batch
// dimension) or 4 (two, of the same sizes in each), with bias broadcast to out or undefined.
// False when a kernel cannot do it.
bool matmul(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, const at::Scalar& alpha,
            const at::Scalar& beta) {
  const at::ScalarType dtype = out.scalar_type();
  if (!is_floating(dtype) || !on_device(out, dtype)) return false;
  if ((out.dim() != 3 && out.dim() != 4) || a.dim() != out.dim() || b.dim() != out.dim()) return false;
  for (const at::Tensor* t : {&a, &b}) {
    if (t->scalar_type() != dtype || t->device() != out.device()) return false;
    for (int64_t d = 0; d < out.dim() - 2; d++) {
      if (t->size(d) != out.size(d) && t->size(d) != 1) return false;
    }
  }
  const bool has_bias = bias.defined() && beta.to<double>() != 0.0;
  if (has_bias && (bias.scalar_type() != dtype || bias.device() != out.device())) return false;
  if (out.numel() == 0) return true;
  Device& dev = device(out.device().index());
  // The kernel writes a contiguous result that no operand shares memory with.
  const xhal_buffer_t* out_buffer = place_of(out).buffer;
  const bool shares = out_buffer == place_of(a).buffer || out_buffer == place_of(b).buffer ||
                      (has_bias && out_buffer == place_of(bias).buffer);
  at::Tensor result = out.is_contiguous() && !shares ? out : at::empty(out.sizes(), out.options());
  const at::ScalarType compute = float_compute(dtype);
  Product q;
  const int64_t r = result.dim() - 2;  // the row dimension
  q.batch = static_cast<uint32_t>(result.size(0) * (result.dim() == 4 ? result.size(1) : 1));
  q.batch_inner = result.dim() == 4 ? static_cast<uint32_t>(std::max<int64_t>(1, result.size(1))) : 1;
  q.m = static_cast<uint32_t>(result.size(r));
  q.n = static_cast<uint32_t>(result.size(r + 1));
  q.k = static_cast<uint32_t>(a.size(r + 1));
  const uint64_t alpha_bits = scalar_bits(alpha, compute), beta_bits = scalar_bits(beta, compute);
  q.scalars[0] = static_cast<uint32_t>(alpha_bits);
  q.scalars[1] = static_cast<uint32_t>(alpha_bits >> 32);
  q.scalars[2] = static_cast<uint32_t>(beta_bits);
  q.scalars[3] = static_cast<uint32_t>(beta_bits >> 32);
  q.offsets[0] = element_offset(a);
  q.offsets[1] = element_offset(b);
  set_product_strides(q.a_strides, a);
  set_product_strides(q.b_strides, b);
  Binding bindings[4] = {Binding{buffer_or(a, dev.placeholder)}, Binding{buffer_or(b, dev.placeholder)},
                         Binding{dev.placeholder}, Binding{place_of(result).buffer}};
  if (has_bias) {
    const at::Tensor expanded = bias.expand(result.sizes());
    q.offsets[2] = element_offset(expanded);
    set_product_strides(q.bias_strides, expanded);
    bindings[2] = Binding{place_of(expanded).buffer};
  }
  q.offsets[3] = element_offset(result);
  // Blocks share loads only where there are rows and columns to share them; a matrix-vector
  // or dot product has one of them and runs an invocation per output.
  const bool tiled = q.m > 1 && q.n > 1 && q.batch <= 65535;
  if (tiled) {
    launch_tiled(dev, tiles_for(dev), dtype, has_bias, q, bindings);
  } else {
    const std::string key = std::string("matmul|") + wgsl_type(dtype) + (has_bias ? "b" : "");
    const Kernel& compiled = recipe_kernel(dev, key, [&] {
      KernelRecipe recipe;
      recipe.files = {"matmul.wgsl"};
      recipe.types = {{"E", wgsl_type(dtype)}, {"F", wgsl_type(compute)}};
      recipe.overrides = {{"HAS_BIAS", has_bias ? 1.0 : 0.0}};
      recipe.entry = "main";
      return recipe;
    });
    launch(dev, compiled, bindings, result.numel(), &q, sizeof q);
  }
  if (!result.is_same(out)) copy_on_device(out, result);
  return true;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  prepare_out(out, {self.size(0), mat2.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  if (!matmul(out3, self.unsqueeze(0), mat2.unsqueeze(0), at::Tensor(), 1, 0)) return XHAL_FALLBACK(mm_out, self, mat2, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  prepare_out(out, {self.size(0), self.size(1), mat2.size(2)});
  if (!matmul(out, self, mat2, at::Tensor(), 1, 0)) return XHAL_FALLBACK(bmm_out, self, mat2, out);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, {mat1.size(0), mat2.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  const at::Tensor bias = self.expand({mat1.size(0), mat2.size(1)}).unsqueeze(0);
  if (!matmul(out3, mat1.unsqueeze(0), mat2.unsqueeze(0), bias, alpha, beta))
    return XHAL_FALLBACK(addmm_out, self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, {batch1.size(0), batch1.size(1), batch2.size(2)});
  const at::Tensor bias = self.expand(out.sizes());
  if (!matmul(out, batch1, batch2, bias, alpha, beta))
    return XHAL_FALLBACK(baddbmm_out, self, batch1, batch2, beta, alpha, out);
  return out;
}

at::Tensor& mv_out(const at::Tensor& self, const at::Tensor& vec, at::Tensor& out) {
  prepare_out(out, {self.size(0)});
  at::Tensor out3 = out.unsqueeze(0).unsqueeze(-1);
  if (!matmul(out3, self.unsqueeze(0), vec.unsqueeze(0).unsqueeze(-1), at::Tensor(), 1, 0))
    return XHAL_FALLBACK(mv_out, self, vec, out);
  return out;
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, {mat.size(0)});
  at::Tensor out3 = out.unsqueeze(0).unsqueeze(-1);
  const at::Tensor bias = self.expand({mat.size(0)}).unsqueeze(0).unsqueeze(-1);
  if (!matmul(out3, mat.unsqueeze(0), vec.unsqueeze(0).unsqueeze(-1), bias, alpha, beta))
    return XHAL_FALLBACK(addmv_out, self, mat, vec, beta, alpha, out);
  return out;
}

at::Tensor dot(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = at::empty({}, self.options());
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ", other.dim(),
              "D tensors");
  TORCH_CHECK(self.size(0) == other.size(0), "inconsistent tensor size, expected tensor [", self.size(0),
              "] and src [", other.size(0), "] to have the same number of elements, but got ", self.size(0), " and ",
              other.size(0), " elements respectively");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  at::Tensor out3 = out.view({1, 1, 1});
  if (!matmul(out3, self.unsqueeze(0).unsqueeze(0), other.unsqueeze(0).unsqueeze(-1), at::Tensor(), 1, 0))
    return XHAL_FALLBACK(dot, self, other);
  return out;
}

}  // namespace

bool batched_product(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  return matmul(out, a, b, at::Tensor(), 1, 0);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.out", mm_out);
  m.impl("bmm.out", bmm_out);
  m.impl("addmm.out", addmm_out);
  m.impl("baddbmm.out", baddbmm_out);
  m.impl("mv.out", mv_out);
  m.impl("addmv.out", addmv_out);
  m.impl("dot", dot);
}

}  // namespace xhal_torch
