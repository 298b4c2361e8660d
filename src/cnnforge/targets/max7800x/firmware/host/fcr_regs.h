/* cnnforge: stand-in for the MSDK header "fcr_regs.h": the RISC-V core's boot address (--riscv). */
#include "mxc.h"
typedef struct {
  volatile uint32_t urvbootaddr;
} mxc_fcr_regs_t;
extern mxc_fcr_regs_t cnnforge_fcr;
#define MXC_FCR (&cnnforge_fcr)
