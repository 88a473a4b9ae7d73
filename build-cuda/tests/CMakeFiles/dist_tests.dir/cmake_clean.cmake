file(REMOVE_RECURSE
  "CMakeFiles/dist_tests.dir/dist/test_mpi_collectives.cpp.o"
  "CMakeFiles/dist_tests.dir/dist/test_mpi_collectives.cpp.o.d"
  "dist_tests"
  "dist_tests.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/dist_tests.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
