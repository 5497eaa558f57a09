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

# gpusim_installed_library(<target> OUTPUT <name> EXPORT <name> SOURCE <file> WHOLE <static libs...>):
# an installed shared library made of gpusim's static libraries linked whole (so each function the
# public headers declare is in it), exporting only what include/gpusim/ marks GPUSIM_API, with the
# public headers and C++20 in its interface and its own dependencies private. libgpusim.so
# (api/) and libgpusim_core.so (core/) are made this way.
function(gpusim_installed_library target)
  cmake_parse_arguments(L "" "OUTPUT;EXPORT;SOURCE" "WHOLE" ${ARGN})
  add_library(${target} SHARED ${L_SOURCE})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${L_OUTPUT}
    EXPORT_NAME ${L_EXPORT}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set(files)
  foreach(t ${L_WHOLE})
    list(APPEND files $<TARGET_FILE:${t}>)
  endforeach()
  # The archives whole first; the normal link after them brings what they use.
  target_link_options(${target} PRIVATE LINKER:--whole-archive ${files} LINKER:--no-whole-archive)
  # Every symbol resolved at link time, except in sanitizer builds, whose runtime comes with the
  # program that loads the library.
  if(NOT GPUSIM_SANITIZE)
    target_link_options(${target} PRIVATE LINKER:--no-undefined)
  endif()
  target_link_libraries(${target} PRIVATE ${L_WHOLE} PUBLIC nlohmann_json::nlohmann_json)
  # The public headers are C++20: a consumer compiles as C++20 (or later) without saying so itself.
  target_compile_features(${target} PUBLIC cxx_std_20)
  gpusim_set_warnings(${target})
endfunction()
