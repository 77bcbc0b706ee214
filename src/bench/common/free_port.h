// The loopback free-port finder moved to base (common/free_port.h) so tests need not include the
// bench layer; this name stays for the bench files that include it.
#pragma once

#include "common/free_port.h"
