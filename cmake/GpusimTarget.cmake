# gpusim_set_warnings(<target>): the project's warning set, as errors when GPUSIM_WERROR is ON.
function(gpusim_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 reports false -Wrestrict positives inside std::string's inlined copies (GCC bug 105329).
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(GPUSIM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
