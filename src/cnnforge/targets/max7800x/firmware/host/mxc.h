/* cnnforge: a minimal stand-in for the MSDK header "mxc.h" (MAX78000 / MAX78002).
 *
 * Only what a CNN firmware folder (cnn.c, main.c, softmax.c) names, so that it compiles on the host
 * (to run the accelerator set-up against a mapped copy of the CNN address space) and for the
 * Cortex-M4 with -Wall -Wextra -Werror. The peripherals outside the CNN (clock control, power
 * domains, GPIO, timer, cache, interrupt vector) are plain variables here: the set-up functions
 * under test never depend on them. SPDX-License-Identifier: Apache-2.0
 */
#ifndef CNNFORGE_MXC_STANDIN_H
#define CNNFORGE_MXC_STANDIN_H

#include <stdint.h>

/* Global control: the CNN clock source and divider, the CNN PLL. */
typedef struct {
  volatile uint32_t pclkdiv;
  volatile uint32_t ipll_ctrl;
  volatile uint32_t perckcn;
} cnnforge_gcr_t;
extern cnnforge_gcr_t cnnforge_gcr;
#define MXC_GCR (&cnnforge_gcr)

/* CNN power domains: power, memory mask, isolation, reset (one bit per quadrant). */
typedef struct {
  volatile uint32_t reg0, reg1, reg2, reg3;
} mxc_gcfr_regs_t;
extern mxc_gcfr_regs_t cnnforge_gcfr;
#define MXC_GCFR (&cnnforge_gcfr)

#define MXC_F_GCR_PCLKDIV_CNNCLKDIV (0x7u << 14)
#define MXC_F_GCR_PCLKDIV_CNNCLKSEL (0x3u << 17)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1 (0x0u << 14)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV2 (0x1u << 14)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV4 (0x2u << 14)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV8 (0x3u << 14)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV16 (0x4u << 14)
#define MXC_S_GCR_PCLKDIV_CNNCLKSEL_PCLK (0x0u << 17)
#define MXC_S_GCR_PCLKDIV_CNNCLKSEL_ISO (0x1u << 17)
#define MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL (0x2u << 17)
#define MXC_F_GCR_IPLL_CTRL_EN (1u << 0)
#define MXC_F_GCR_IPLL_CTRL_RDY (1u << 8)

typedef enum {
  MXC_SYS_PERIPH_CLOCK_CNN = 25,
  MXC_SYS_PERIPH_CLOCK_SMPHR = 41,
  MXC_SYS_PERIPH_CLOCK_CPU1 = 63
} mxc_sys_periph_clock_t;
typedef enum { MXC_SYS_CLOCK_IPO = 0, MXC_SYS_CLOCK_IBRO = 1 } mxc_sys_system_clock_t;
typedef enum { RISCV_IRQn = 67, CNN_IRQn = 64 } IRQn_Type;

typedef struct {
  volatile uint32_t out;
} mxc_gpio_regs_t;
typedef enum { MXC_GPIO_PAD_NONE = 0 } mxc_gpio_pad_t;
typedef enum { MXC_GPIO_FUNC_IN = 0, MXC_GPIO_FUNC_OUT = 1 } mxc_gpio_func_t;
typedef enum { MXC_GPIO_VSSEL_VDDIO = 0 } mxc_gpio_vssel_t;
typedef struct {
  mxc_gpio_regs_t *port;
  uint32_t mask;
  mxc_gpio_func_t func;
  mxc_gpio_pad_t pad;
  mxc_gpio_vssel_t vssel;
} mxc_gpio_cfg_t;
extern mxc_gpio_regs_t cnnforge_gpio[4];
#define MXC_GPIO0 (&cnnforge_gpio[0])
#define MXC_GPIO1 (&cnnforge_gpio[1])
#define MXC_GPIO2 (&cnnforge_gpio[2])
#define MXC_GPIO3 (&cnnforge_gpio[3])
#define MXC_GPIO_PIN_0 (1u << 0)
#define MXC_GPIO_PIN_1 (1u << 1)
#define MXC_GPIO_PIN_2 (1u << 2)
#define MXC_GPIO_PIN_3 (1u << 3)
#define MXC_GPIO_PIN_4 (1u << 4)
#define MXC_GPIO_PIN_5 (1u << 5)

typedef struct {
  volatile uint32_t cnt;
} mxc_tmr_regs_t;
extern mxc_tmr_regs_t cnnforge_tmr[4];
#define MXC_TMR0 (&cnnforge_tmr[0])
#define MXC_TMR1 (&cnnforge_tmr[1])
typedef struct {
  volatile uint32_t ctrl;
} mxc_icc_regs_t;
extern mxc_icc_regs_t cnnforge_icc;
#define MXC_ICC0 (&cnnforge_icc)
#define MXC_ICC1 (&cnnforge_icc)

/* Semaphores: the RISC-V core's interrupt to the Arm core. */
typedef struct {
  volatile uint32_t irq0, irq1;
} mxc_sema_regs_t;
extern mxc_sema_regs_t cnnforge_sema;
#define MXC_SEMA (&cnnforge_sema)
#define MXC_F_SEMA_IRQ0_EN (1u << 0)
#define MXC_F_SEMA_IRQ0_CM4_IRQ (1u << 16)

extern uint32_t SystemCoreClock;
#define MSEC(x) ((x) * 1000UL)
#define SEC(x) ((x) * 1000000UL)

int MXC_GPIO_Config(const mxc_gpio_cfg_t *cfg);
void MXC_GPIO_OutSet(mxc_gpio_regs_t *port, uint32_t mask);
void MXC_GPIO_OutClr(mxc_gpio_regs_t *port, uint32_t mask);
void MXC_SYS_ClockEnable(mxc_sys_periph_clock_t clock);
void MXC_SYS_ClockDisable(mxc_sys_periph_clock_t clock);
int MXC_SYS_Clock_Select(mxc_sys_system_clock_t clock);
void MXC_NVIC_SetVector(IRQn_Type irq, void (*handler)(void));
void NVIC_EnableIRQ(IRQn_Type irq);
void NVIC_EnableEVENT(IRQn_Type irq);
void NVIC_ClearPendingIRQ(IRQn_Type irq);
void NVIC_ClearPendingEVENT(IRQn_Type irq);
void MXC_TMR_SW_Start(mxc_tmr_regs_t *tmr);
unsigned int MXC_TMR_SW_Stop(mxc_tmr_regs_t *tmr);
void MXC_ICC_Enable(mxc_icc_regs_t *icc);
void MXC_LP_EnterSleepMode(void);
int MXC_Delay(uint32_t us);
void SystemCoreClockUpdate(void);
void LED_On(unsigned int idx);
void __enable_irq(void);
void Debug_Init(void);
void LED_Off(unsigned int idx);

#endif
