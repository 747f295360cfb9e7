// CUDA device discovery, usable from code built without nvcc.
#pragma once

#include <string>

namespace ds4::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int device_count();
std::string device_name(int index);

}  // namespace ds4::cuda
