file(REMOVE_RECURSE
  "CMakeFiles/shipped"
)

# Per-language clean rules from dependency scanning.
foreach(lang )
  include(CMakeFiles/shipped.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
