// Why CUDA cannot run here, as a user can act on it: without a driver the runtime says
// "CUDA driver version is insufficient for CUDA runtime version", which misleads. Plain
// C++ (the error as an int), so that nvcc's .cu files include it too.
#pragma once
#include <string>

namespace distrain {

std::string cuda_unavailable_reason(int cuda_error);

}  // namespace distrain
