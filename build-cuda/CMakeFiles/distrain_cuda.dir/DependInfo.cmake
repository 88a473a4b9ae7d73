
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/core/backend/cuda/attention_bf16_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/attention_bf16_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/attention_bf16_kernels.cu.o.d"
  "/work/main/core/backend/cuda/attention_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/attention_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/attention_kernels.cu.o.d"
  "/work/main/core/backend/cuda/batch_norm_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/batch_norm_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/batch_norm_kernels.cu.o.d"
  "/work/main/core/backend/cuda/bf16_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/bf16_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/bf16_kernels.cu.o.d"
  "/work/main/core/backend/cuda/conv_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/conv_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/conv_kernels.cu.o.d"
  "/work/main/core/backend/cuda/elementwise.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/elementwise.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/elementwise.cu.o.d"
  "/work/main/core/backend/cuda/gpu_info.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/gpu_info.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/gpu_info.cu.o.d"
  "/work/main/core/backend/cuda/llama_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/llama_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/llama_kernels.cu.o.d"
  "/work/main/core/backend/cuda/pool_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/pool_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/pool_kernels.cu.o.d"
  "/work/main/core/backend/cuda/transformer_kernels.cu" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/transformer_kernels.cu.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/transformer_kernels.cu.o.d"
  "/work/main/core/backend/cuda/cuda_backend.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_backend.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_backend.cpp.o.d"
  "/work/main/core/backend/cuda/cuda_batch_norm.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_batch_norm.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_batch_norm.cpp.o.d"
  "/work/main/core/backend/cuda/cuda_llama_ops.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_llama_ops.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_llama_ops.cpp.o.d"
  "/work/main/core/backend/cuda/cuda_pool2d.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_pool2d.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_pool2d.cpp.o.d"
  "/work/main/core/backend/cuda/cuda_transformer_ops.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_transformer_ops.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cuda_transformer_ops.cpp.o.d"
  "/work/main/core/backend/cuda/cudnn_conv2d.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cudnn_conv2d.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/cudnn_conv2d.cpp.o.d"
  "/work/main/core/backend/cuda/gemm_filter_grad.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/gemm_filter_grad.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/gemm_filter_grad.cpp.o.d"
  "/work/main/core/backend/cuda/plugin.cpp" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/plugin.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/backend/cuda/plugin.cpp.o.d"
  "/work/main/core/comm/nccl/nccl_communicator.cpp" "CMakeFiles/distrain_cuda.dir/core/comm/nccl/nccl_communicator.cpp.o" "gcc" "CMakeFiles/distrain_cuda.dir/core/comm/nccl/nccl_communicator.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
