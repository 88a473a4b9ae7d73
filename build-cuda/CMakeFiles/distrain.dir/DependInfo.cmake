
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/cli/bench_load.cpp" "CMakeFiles/distrain.dir/cli/bench_load.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/bench_load.cpp.o.d"
  "/work/main/cli/bench_mpirun.cpp" "CMakeFiles/distrain.dir/cli/bench_mpirun.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/bench_mpirun.cpp.o.d"
  "/work/main/cli/bench_scaling.cpp" "CMakeFiles/distrain.dir/cli/bench_scaling.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/bench_scaling.cpp.o.d"
  "/work/main/cli/check_report.cpp" "CMakeFiles/distrain.dir/cli/check_report.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/check_report.cpp.o.d"
  "/work/main/cli/cmd_bench.cpp" "CMakeFiles/distrain.dir/cli/cmd_bench.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_bench.cpp.o.d"
  "/work/main/cli/cmd_check.cpp" "CMakeFiles/distrain.dir/cli/cmd_check.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_check.cpp.o.d"
  "/work/main/cli/cmd_compare.cpp" "CMakeFiles/distrain.dir/cli/cmd_compare.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_compare.cpp.o.d"
  "/work/main/cli/cmd_eval.cpp" "CMakeFiles/distrain.dir/cli/cmd_eval.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_eval.cpp.o.d"
  "/work/main/cli/cmd_export.cpp" "CMakeFiles/distrain.dir/cli/cmd_export.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_export.cpp.o.d"
  "/work/main/cli/cmd_generate.cpp" "CMakeFiles/distrain.dir/cli/cmd_generate.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_generate.cpp.o.d"
  "/work/main/cli/cmd_import.cpp" "CMakeFiles/distrain.dir/cli/cmd_import.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_import.cpp.o.d"
  "/work/main/cli/cmd_info.cpp" "CMakeFiles/distrain.dir/cli/cmd_info.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_info.cpp.o.d"
  "/work/main/cli/cmd_plan.cpp" "CMakeFiles/distrain.dir/cli/cmd_plan.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_plan.cpp.o.d"
  "/work/main/cli/cmd_predict.cpp" "CMakeFiles/distrain.dir/cli/cmd_predict.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_predict.cpp.o.d"
  "/work/main/cli/cmd_tokenize.cpp" "CMakeFiles/distrain.dir/cli/cmd_tokenize.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_tokenize.cpp.o.d"
  "/work/main/cli/cmd_train.cpp" "CMakeFiles/distrain.dir/cli/cmd_train.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/cmd_train.cpp.o.d"
  "/work/main/cli/common.cpp" "CMakeFiles/distrain.dir/cli/common.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/common.cpp.o.d"
  "/work/main/cli/inference.cpp" "CMakeFiles/distrain.dir/cli/inference.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/inference.cpp.o.d"
  "/work/main/cli/main.cpp" "CMakeFiles/distrain.dir/cli/main.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/main.cpp.o.d"
  "/work/main/cli/plan_measure.cpp" "CMakeFiles/distrain.dir/cli/plan_measure.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/plan_measure.cpp.o.d"
  "/work/main/cli/plan_probe.cpp" "CMakeFiles/distrain.dir/cli/plan_probe.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/plan_probe.cpp.o.d"
  "/work/main/cli/scaling_chart.cpp" "CMakeFiles/distrain.dir/cli/scaling_chart.cpp.o" "gcc" "CMakeFiles/distrain.dir/cli/scaling_chart.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
