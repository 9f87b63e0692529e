// Compiles a kernel body once per instruction-set level of diffnet/cpu_isa.h, each copy in its own
// namespace diffnet::ops::cpu::{base, avx2, avx512} (what DIFFNET_CPU_DISPATCH calls):
//
//   #include <...every header the body needs...>
//   #define DIFFNET_CPU_KERNEL_BODY "ops/x/cpu/x_kernel.inc"
//   #include "ops/cpu_isa_foreach.h"
//
// The avx2 and avx512 copies are compiled under `#pragma GCC target`, which applies to the functions
// defined in the body only. Every header must be included before this file: a header first included
// inside a target region would compile its inline functions for that level, and the linker could keep
// that copy for code that runs on any CPU. In the body, DN_VEC_BYTES and DN_VEC_REGS are the level's
// vector width and number of vector registers (for GCC vector extensions); the compiler also
// vectorises plain loops for the level.
#ifndef DIFFNET_CPU_KERNEL_BODY
#error "define DIFFNET_CPU_KERNEL_BODY before including ops/cpu_isa_foreach.h"
#endif

#include "diffnet/cpu_isa.h"

// base: the build's own flags (plain x86-64, or the build machine's CPU with DIFFNET_NATIVE).
#if defined(__AVX512F__)
#define DN_VEC_BYTES 64
#define DN_VEC_REGS 32
#elif defined(__AVX__)
#define DN_VEC_BYTES 32
#define DN_VEC_REGS 16
#else
#define DN_VEC_BYTES 16
#define DN_VEC_REGS 16
#endif
namespace diffnet::ops::cpu::base {
#include DIFFNET_CPU_KERNEL_BODY
}  // namespace diffnet::ops::cpu::base
#undef DN_VEC_BYTES
#undef DN_VEC_REGS

#if DIFFNET_CPU_MULTI_ISA
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define DN_VEC_BYTES 32
#define DN_VEC_REGS 16
namespace diffnet::ops::cpu::avx2 {
#include DIFFNET_CPU_KERNEL_BODY
}  // namespace diffnet::ops::cpu::avx2
#undef DN_VEC_BYTES
#undef DN_VEC_REGS
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,prefer-vector-width=512")
#define DN_VEC_BYTES 64
#define DN_VEC_REGS 32
namespace diffnet::ops::cpu::avx512 {
#include DIFFNET_CPU_KERNEL_BODY
}  // namespace diffnet::ops::cpu::avx512
#undef DN_VEC_BYTES
#undef DN_VEC_REGS
#pragma GCC pop_options
#endif
