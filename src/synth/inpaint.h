// Diffusion inpainting: unknown pixels are set to the harmonic interpolation of the known pixels
// around them (discrete Laplace equation, known pixels as Dirichlet boundary, image edges as
// zero-flux boundary), solved coarse-to-fine: each level is initialised from the next coarser one
// and refined by successive over-relaxation sweeps.
#pragma once

#include <vector>

#include "synth/raster.h"

namespace diffnet::synth {

// Fills the pixels of `img` inside `region` whose entry in `unknown` (region-sized, row-major,
// non-zero = fill) is set. Only pixels flagged unknown are written. Known pixels in a 2-px ring
// around the region (clipped to the image) and inside it serve as boundary values; when there is no
// known pixel at all the region is filled with mid-grey 128.
void inpaint_diffusion(Raster& img, const Box& region, const std::vector<uint8_t>& unknown);

}  // namespace diffnet::synth
