/*
 * ring_types.h - in the source tree, the way from ring.h to the shared numbers
 * that proto/ring_types.h defines, so that ring.h's `#include "ring_types.h"`
 * finds them here as it finds the installed copy beside the installed ring.h
 * (`make install` installs proto/ring_types.h, not this file).
 */
#include "../proto/ring_types.h"
