// libgpusim.so is made of the gpusim libraries linked whole (api/CMakeLists.txt); this file
// only gives the target a source of its own.
#include "gpusim/gpusim.h"
