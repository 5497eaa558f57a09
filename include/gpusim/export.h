// What libgpusim.so and libgpusim_core.so export. Both are built with hidden visibility
// (-fvisibility=hidden -fvisibility-inlines-hidden), so only declarations marked GPUSIM_API are
// symbols a program can link against: the contract of include/gpusim/. Internal functions,
// template instantiations and the third-party code linked in (fmt, protobuf, yaml-cpp, SQLite,
// shaderc) stay inside. Static builds (the programs, the tests) ignore the mark.
//
// GPUSIM_VERSION_MAJOR/MINOR: the library's version, for #if checks; GPUSIM_BACKEND_API_VERSION
// (backend_plugin.h) versions the plugin interface separately.
#pragma once

#if defined(_WIN32)
#define GPUSIM_API
#else
#define GPUSIM_API __attribute__((visibility("default")))
#endif

#define GPUSIM_VERSION_MAJOR 0
#define GPUSIM_VERSION_MINOR 1
