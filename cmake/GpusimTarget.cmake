# gpusim_set_warnings(<target>): the project's warning set, as errors when GPUSIM_WERROR is ON.
function(gpusim_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(GPUSIM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
