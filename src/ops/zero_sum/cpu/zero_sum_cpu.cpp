// Binding of the fused op's CPU kernels (cpu/zero_sum_kernel.h) to tensors: the CPU kernels of the op per
// dispatch key, and the layout conversions around them.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <tuple>

#include "diffnet/zero_sum.h"
#include "ops/zero_sum/cpu/zero_sum_kernel.h"
#include "ops/zero_sum/zero_sum_impl.h"

namespace diffnet::ops::detail {
namespace {

cpu::Strides strides_of(const at::Tensor& t) {
  cpu::Strides s;
  if (t.defined()) s.b = t.stride(0), s.c = t.stride(1), s.h = t.stride(2), s.w = t.stride(3);
  return s;
}

cpu::ZeroSumShape shape_of(const at::Tensor& t) {
  cpu::ZeroSumShape s;
  s.B = t.size(0), s.C = t.size(1), s.H = t.size(2), s.W = t.size(3);
  return s;
}

}  // namespace

at::Tensor to_planes(const at::Tensor& t) {
  if (t.is_cuda()) return t.contiguous();
  if (!is_channels_last(t)) return t;
  if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble) return t.contiguous();
  at::Tensor out = at::empty(t.sizes(), t.options());
  AT_DISPATCH_FLOATING_TYPES(t.scalar_type(), "zero_sum_to_planes", [&] {
    cpu::channels_last_to_planes<scalar_t>(t.data_ptr<scalar_t>(), strides_of(t), out.data_ptr<scalar_t>(),
                                           shape_of(t));
  });
  return out;
}

at::Tensor to_layout(const at::Tensor& t, bool channels_last) {
  if (!channels_last || t.dim() != 4 || t.size(1) <= 1 || t.size(2) * t.size(3) <= 1) return t;
  if (t.is_cuda() || (t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble) || !t.is_contiguous())
    return t.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor out = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::ChannelsLast));
  AT_DISPATCH_FLOATING_TYPES(t.scalar_type(), "zero_sum_to_layout", [&] {
    cpu::planes_to_channels_last<scalar_t>(t.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), strides_of(out),
                                           shape_of(t));
  });
  return out;
}

at::Tensor fused_forward_cpu(const at::Tensor& x_in, const at::Tensor& theta, const at::Tensor& weight_in,
                             const at::Tensor& bias_in, int64_t n_free) {
  const bool cl = is_channels_last(x_in);
  auto [kern, weight] = padded_filters(full_kernels(theta, n_free), weight_in);
  const at::Tensor bias = bias_in.contiguous();
  if (cl && x_in.is_contiguous(at::MemoryFormat::ChannelsLast) && x_in.size(2) * x_in.size(3) > 1) {
    // channels_last in and out, without a layout conversion, when the channels fill SIMD vectors.
    at::Tensor out;
    AT_DISPATCH_FLOATING_TYPES(x_in.scalar_type(), "zero_sum_fused_cpu_nhwc", [&] {
      if (x_in.size(1) % cpu::zero_sum_nhwc_lanes<scalar_t>() != 0) return;
      out = at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::ChannelsLast));
      cpu::ZeroSumShape s = shape_of(x_in);
      s.M = kern.size(1), s.K = zero_sum_kernel_size(theta);
      cpu::zero_sum_forward_nhwc<scalar_t>(x_in.data_ptr<scalar_t>(), kern.data_ptr<scalar_t>(),
                                           weight.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(),
                                           out.data_ptr<scalar_t>(), s);
    });
    if (out.defined()) return out;
  }
  const at::Tensor x = to_planes(x_in);  // the kernels read any strides in place, but planes fast
  at::Tensor out = at::empty(x.sizes(), x.options());
  cpu::ZeroSumShape s = shape_of(x);
  s.M = kern.size(1), s.K = zero_sum_kernel_size(theta);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "zero_sum_fused_cpu", [&] {
    cpu::zero_sum_forward_cpu<scalar_t>(x.data_ptr<scalar_t>(), strides_of(x), kern.data_ptr<scalar_t>(),
                                        weight.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(),
                                        out.data_ptr<scalar_t>(), strides_of(out), s);
  });
  return to_layout(out, cl);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_backward_cpu(const at::Tensor& g,
                                                                            const at::Tensor& x,
                                                                            const at::Tensor& theta,
                                                                            const at::Tensor& weight_in,
                                                                            int64_t n_free, bool need_dx) {
  const int64_t C = theta.size(0), M = theta.size(1);
  auto [kern, weight] = padded_filters(full_kernels(theta, n_free), weight_in);
  const int64_t Mp = kern.size(1), KK = kern.size(2);
  at::Tensor dx = need_dx ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor dk = at::empty({C, Mp, KK}, x.options());
  at::Tensor dw = at::empty({C, Mp}, x.options());
  at::Tensor db = at::empty({C}, x.options());
  cpu::ZeroSumShape s = shape_of(x);
  s.M = Mp, s.K = zero_sum_kernel_size(theta);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "zero_sum_fused_backward_cpu", [&] {
    cpu::zero_sum_backward_cpu<scalar_t>(x.data_ptr<scalar_t>(), strides_of(x), g.data_ptr<scalar_t>(),
                                         strides_of(g), kern.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
                                         need_dx ? dx.data_ptr<scalar_t>() : nullptr, strides_of(dx),
                                         dk.data_ptr<scalar_t>(), dw.data_ptr<scalar_t>(), db.data_ptr<scalar_t>(),
                                         s);
  });
  return {dx, theta_grad(dk.narrow(1, 0, M), theta, n_free), dw.narrow(1, 0, M).contiguous(), db};
}

}  // namespace diffnet::ops::detail
