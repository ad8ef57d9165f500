// sample_type.hpp — what a data set's sample values are stored as (dataset.json "dtype"):
// uint8 pixels (normalised as x/255), or the input's own int16 / float16 / float32 values
// (science data: prep keeps them as they are; the reader normalises
// (transform(x) − mean) / std). Definitions in dataset.cpp; the HDF5 type in h5util.hpp.
#pragma once
#include <cstdint>
#include <string>

namespace cnnscale {

enum class SampleType { u8, i16, f16, f32 };
const char* sample_type_name(SampleType t);  // "uint8", "int16", "float16", "float32"
bool parse_sample_type(const std::string& s, SampleType* out);
int sample_type_bytes(SampleType t);
// float16 (IEEE binary16) bits → float, exactly.
float half_to_float(uint16_t h);

}  // namespace cnnscale
