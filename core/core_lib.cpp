// libgpusim_core.so is made of the core libraries linked whole (core/CMakeLists.txt); this file
// only gives the target a source of its own.
#include "gpusim/predict.h"
#include "gpusim/scheduler.h"
