"""Lossless windows of a JPEG page, shared by scripts/mine-negatives.sh and scripts/real-positives.py: a
window whose origin is a multiple of 16 (a whole number of 4:2:0 MCUs) is cut by `jpegtran -crop` without
moving a coefficient, so it keeps the scan's own quantized DCT. Standard library only; needs jpegtran
(Debian libjpeg-turbo-progs).
"""
import subprocess

R, A = 256, 16  # window size, alignment


def aligned_origin(centre, extent):
    """The 16-aligned origin along one axis of the R-wide window centred as near `centre` as the page's
    `extent` (>= R) allows: rounded down to 16, clamped into [0, the last aligned origin inside the page]."""
    return min(max(0, (centre - R // 2) // A * A), (extent - R) // A * A)


def cut_window(src, ox, oy, dst):
    """Writes the RxR window of JPEG `src` at (ox, oy) to `dst`, losslessly, without metadata."""
    subprocess.run(["jpegtran", "-crop", f"{R}x{R}+{ox}+{oy}", "-copy", "none", "-outfile", dst, src], check=True)
