/* cnnforge: stand-in for the MSDK header "gcfr_regs.h"; mxc.h (the stand-in) defines MXC_GCFR. */
#include "mxc.h"
