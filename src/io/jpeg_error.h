// libjpeg error handling shared by the JPEG decoder and encoder: errors and data-corruption warnings
// longjmp back to the caller's setjmp with a formatted message (never exit(), never a silent grey image).
#pragma once

#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>
#include <jerror.h>

namespace diffnet::io_detail {

struct JpegErrorMgr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 128];
};

// Warnings that do not affect decoded data: kept as warnings. Every other warning is an error.
inline bool jpeg_warning_is_benign(j_common_ptr c) {
  const int code = c->err->msg_code;
  if (code == JWRN_ADOBE_XFORM || code == JWRN_JFIF_MAJOR || code == JWRN_BOGUS_ICC) return true;
  // Stray bytes after the last scan, just before EOI: the image data is complete.
  if (code == JWRN_EXTRANEOUS_DATA && c->err->msg_parm.i[1] == 0xD9) return true;
  return false;
}

extern "C" inline void jpeg_on_error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrorMgr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

extern "C" inline void jpeg_on_emit_message(j_common_ptr c, int level) {
  if (level >= 0) return;  // trace messages
  if (jpeg_warning_is_benign(c)) {
    c->err->num_warnings++;
    return;
  }
  auto* e = reinterpret_cast<JpegErrorMgr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

inline void jpeg_install_error_handler(JpegErrorMgr* e, jpeg_common_struct* c) {
  c->err = jpeg_std_error(&e->pub);
  e->pub.error_exit = jpeg_on_error_exit;
  e->pub.emit_message = jpeg_on_emit_message;
  e->message[0] = '\0';
}

}  // namespace diffnet::io_detail
