/* cnnforge: stand-in for the MSDK header "sema_regs.h" (the RISC-V core signals the Arm core). */
#include "mxc.h"
