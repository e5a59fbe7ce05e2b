// Sub-byte packings (bytes only, no arithmetic on values).
//
// PMX int4xP (P = 4: int16 words, "int4x4"; P = 8: int32 words, "int4x8"):
// codes of logical shape [d0, row...] (row = product of the dims after 0)
// are stored as words of shape [d0 / P, row...]; nibble j (bits 4j..4j+3,
// j = 0 least significant) of word (i, r) holds code (P*i + j, r). Words are
// little-endian. Example (P = 4): rows x cols codes [[0,15],[8,9],[11,7],[4,10]]
// pack to words 0x4B80, 0xA79F, bytes 80 4b 9f a7.
//
// ONNX dense sub-byte (bits = 2 or 4): the flattened tensor, element k in
// bits [k*bits, (k+1)*bits) of the byte stream (first element in the least
// significant bits), last byte zero-padded.
#ifndef NIBBLE_FORMATS_INT4_PACKING_H_
#define NIBBLE_FORMATS_INT4_PACKING_H_

#include <cstddef>
#include <cstdint>

namespace nibble {

// codes: d0 * row values in [0, 15] (only the low 4 bits are used).
// words: d0 / P * row words of P*4 bits (d0 % P == 0), written as bytes.
void PackInt4Interleaved(const uint8_t* codes, int64_t d0, int64_t row, int p, void* words);
void UnpackInt4Interleaved(const void* words, int64_t d0, int64_t row, int p, uint8_t* codes);

// codes: n values (low `bits` bits used); out: ceil(n * bits / 8) bytes.
void PackDense(const uint8_t* codes, int64_t n, int bits, uint8_t* out);
void UnpackDense(const uint8_t* packed, int64_t n, int bits, uint8_t* codes);

}  // namespace nibble

#endif  // NIBBLE_FORMATS_INT4_PACKING_H_
