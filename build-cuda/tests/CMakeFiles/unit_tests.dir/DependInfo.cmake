
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/cli/scaling_chart.cpp" "tests/CMakeFiles/unit_tests.dir/__/cli/scaling_chart.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/__/cli/scaling_chart.cpp.o.d"
  "/work/main/tests/unit/main.cpp" "tests/CMakeFiles/unit_tests.dir/unit/main.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/main.cpp.o.d"
  "/work/main/tests/unit/test_activation_slots.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_activation_slots.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_activation_slots.cpp.o.d"
  "/work/main/tests/unit/test_bad_input.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_bad_input.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_bad_input.cpp.o.d"
  "/work/main/tests/unit/test_bf16_matmul.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_bf16_matmul.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_bf16_matmul.cpp.o.d"
  "/work/main/tests/unit/test_config_table.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_config_table.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_config_table.cpp.o.d"
  "/work/main/tests/unit/test_cuda.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_cuda.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_cuda.cpp.o.d"
  "/work/main/tests/unit/test_cuda_transformer.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_cuda_transformer.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_cuda_transformer.cpp.o.d"
  "/work/main/tests/unit/test_data.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_data.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_data.cpp.o.d"
  "/work/main/tests/unit/test_device_memory.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_device_memory.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_device_memory.cpp.o.d"
  "/work/main/tests/unit/test_export.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_export.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_export.cpp.o.d"
  "/work/main/tests/unit/test_gpt_strategies.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_gpt_strategies.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_gpt_strategies.cpp.o.d"
  "/work/main/tests/unit/test_gradient_slots.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_gradient_slots.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_gradient_slots.cpp.o.d"
  "/work/main/tests/unit/test_hdf5_data.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_hdf5_data.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_hdf5_data.cpp.o.d"
  "/work/main/tests/unit/test_image_folder.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_image_folder.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_image_folder.cpp.o.d"
  "/work/main/tests/unit/test_layer_forward.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_layer_forward.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_layer_forward.cpp.o.d"
  "/work/main/tests/unit/test_layer_gradients.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_layer_gradients.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_layer_gradients.cpp.o.d"
  "/work/main/tests/unit/test_loss.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_loss.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_loss.cpp.o.d"
  "/work/main/tests/unit/test_mesh.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_mesh.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_mesh.cpp.o.d"
  "/work/main/tests/unit/test_metrics_log.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_metrics_log.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_metrics_log.cpp.o.d"
  "/work/main/tests/unit/test_model.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_model.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_model.cpp.o.d"
  "/work/main/tests/unit/test_optim.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_optim.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_optim.cpp.o.d"
  "/work/main/tests/unit/test_pipeline.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_pipeline.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_pipeline.cpp.o.d"
  "/work/main/tests/unit/test_plan.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_plan.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_plan.cpp.o.d"
  "/work/main/tests/unit/test_progress.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_progress.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_progress.cpp.o.d"
  "/work/main/tests/unit/test_recipe_edit.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_recipe_edit.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_recipe_edit.cpp.o.d"
  "/work/main/tests/unit/test_run_lock.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_run_lock.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_run_lock.cpp.o.d"
  "/work/main/tests/unit/test_scaling_chart.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_scaling_chart.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_scaling_chart.cpp.o.d"
  "/work/main/tests/unit/test_smoke_train.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_smoke_train.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_smoke_train.cpp.o.d"
  "/work/main/tests/unit/test_step_ledger.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_step_ledger.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_step_ledger.cpp.o.d"
  "/work/main/tests/unit/test_strategies.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_strategies.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_strategies.cpp.o.d"
  "/work/main/tests/unit/test_tensor_parallel.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_tensor_parallel.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_tensor_parallel.cpp.o.d"
  "/work/main/tests/unit/test_tensorboard.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_tensorboard.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_tensorboard.cpp.o.d"
  "/work/main/tests/unit/test_token_data.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_token_data.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_token_data.cpp.o.d"
  "/work/main/tests/unit/test_tokenizer.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_tokenizer.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_tokenizer.cpp.o.d"
  "/work/main/tests/unit/test_train.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_train.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_train.cpp.o.d"
  "/work/main/tests/unit/test_transformer.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_transformer.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_transformer.cpp.o.d"
  "/work/main/tests/unit/test_weight_diff.cpp" "tests/CMakeFiles/unit_tests.dir/unit/test_weight_diff.cpp.o" "gcc" "tests/CMakeFiles/unit_tests.dir/unit/test_weight_diff.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
