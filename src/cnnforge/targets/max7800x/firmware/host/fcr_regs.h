/* cnnforge: stand-in for the MSDK header "fcr_regs.h"; nothing of it is used by the CNN set-up. */
#include "mxc.h"
