// libjpeg error handling shared by the JPEG decoder and encoder: errors and data-corruption warnings
// longjmp back to the caller's setjmp with a formatted message (never exit(), never a silent grey image),
// except recoverable warnings, which are collected when the caller asks for them.
#pragma once

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

namespace diffnet::io_detail {

struct JpegErrorMgr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 128];
  // Where recoverable warnings go (DecodeOptions::warnings); null: they are errors.
  std::vector<std::string>* warnings = nullptr;
};

// Warnings that do not affect decoded data: kept as warnings. Every other warning is an error.
inline bool jpeg_warning_is_benign(j_common_ptr c) {
  const int code = c->err->msg_code;
  if (code == JWRN_ADOBE_XFORM || code == JWRN_JFIF_MAJOR || code == JWRN_BOGUS_ICC) return true;
  if (code == JWRN_EXTRANEOUS_DATA) {
    // Stray bytes just before EOI (the image data is complete) or between header markers before the
    // first scan (no image data yet) are harmless; anywhere else they mean corrupt scan data.
    if (c->err->msg_parm.i[1] == 0xD9) return true;
    if (c->is_decompressor && reinterpret_cast<j_decompress_ptr>(c)->input_scan_number == 0) return true;
  }
  return false;
}

// Corrupt-data warnings after which libjpeg still delivers every pixel, as image viewers show them:
// stray bytes before a marker, a restart marker out of place (resynchronised), an odd scan sequence.
// Data that is missing or undecodable (premature end, bad Huffman/arithmetic code) stays an error.
inline bool jpeg_warning_is_recoverable(j_common_ptr c) {
  const int code = c->err->msg_code;
  return code == JWRN_EXTRANEOUS_DATA || code == JWRN_MUST_RESYNC || code == JWRN_NOT_SEQUENTIAL ||
         code == JWRN_BOGUS_PROGRESSION;
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
  if (e->warnings && jpeg_warning_is_recoverable(c)) {
    c->err->num_warnings++;
    char text[JMSG_LENGTH_MAX];
    (*c->err->format_message)(c, text);
    try {
      const std::string w = std::string("JPEG: ") + text;
      // One line per kind of problem: a damaged file can repeat the same warning thousands of times.
      if (e->warnings->size() < 16 && std::find(e->warnings->begin(), e->warnings->end(), w) == e->warnings->end())
        e->warnings->push_back(w);
    } catch (...) {  // out of memory: drop the warning text, keep decoding
    }
    return;
  }
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
