/* cnnforge: runs a CNN firmware folder's accelerator set-up on the host and dumps the state it leaves.
 *
 * The CNN's address space (0x50000000 upward, size given on the command line) is an anonymous
 * mapping at its own address, so the firmware's register and memory writes land in ordinary pages.
 * Calls cnn_init, cnn_load_weights, cnn_load_bias, cnn_configure, dumps every non-zero word as
 * (address, value) pairs to OUT.state, then load_input and dumps again to OUT.input, then writes
 * the known-answer table of sampleoutput.h to OUT.kat. Two hardware behaviours are modelled: a
 * quadrant's "clear registers" request (bit 7 of the SRAM test register) is answered by its done
 * bit (bit 25), as a MAX78002 cnn_init waits for it; a memory self-test (BIST, --zero-sram)
 * request (bits 0, 2, 4, 6) by its done bits (18 + request / 2, and 27 as the MAX78000 reads).
 * Any other wait times out (exit 3). With a last argument "main" the firmware's own main runs
 * instead, against a fake accelerator (accelerator_done): its output is the program's.
 * The FIFO registers' page (0x50000000) is kept inaccessible: each access faults, is single-stepped
 * with the page opened, and every write to a FIFO data register is appended to OUT.fifo as
 * (register, value), so input streamed through the FIFOs is seen word by word (x86-64 Linux).
 * SPDX-License-Identifier: Apache-2.0
 */
#define _GNU_SOURCE
#include <signal.h>
#include <ucontext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include "mxc.h"
#include "cnn.h"
#include "sampleoutput.h"

#define CNN_BASE 0x50000000UL

cnnforge_gcr_t cnnforge_gcr;
mxc_gcfr_regs_t cnnforge_gcfr;
mxc_gpio_regs_t cnnforge_gpio[4];
mxc_tmr_regs_t cnnforge_tmr[4];
mxc_icc_regs_t cnnforge_icc;
mxc_sema_regs_t cnnforge_sema;
uint32_t SystemCoreClock = 100000000;

int MXC_GPIO_Config(const mxc_gpio_cfg_t *cfg) { (void) cfg; return 0; }
void MXC_GPIO_OutSet(mxc_gpio_regs_t *port, uint32_t mask) { port->out |= mask; }
void MXC_GPIO_OutClr(mxc_gpio_regs_t *port, uint32_t mask) { port->out &= ~mask; }
void MXC_SYS_ClockEnable(mxc_sys_periph_clock_t clock) { (void) clock; }
void MXC_SYS_ClockDisable(mxc_sys_periph_clock_t clock) { (void) clock; }
int MXC_SYS_Clock_Select(mxc_sys_system_clock_t clock) { (void) clock; return 0; }
void MXC_NVIC_SetVector(IRQn_Type irq, void (*handler)(void)) { (void) irq; (void) handler; }
void NVIC_EnableIRQ(IRQn_Type irq) { (void) irq; }
void NVIC_EnableEVENT(IRQn_Type irq) { (void) irq; }
void NVIC_ClearPendingIRQ(IRQn_Type irq) { (void) irq; }
void NVIC_ClearPendingEVENT(IRQn_Type irq) { (void) irq; }
void MXC_TMR_SW_Start(mxc_tmr_regs_t *tmr) { tmr->cnt = 0; }
unsigned int MXC_TMR_SW_Stop(mxc_tmr_regs_t *tmr) { return tmr->cnt + 1; }
void MXC_ICC_Enable(mxc_icc_regs_t *icc) { icc->ctrl = 1; }
static int run_main; /* "main": the firmware's own main runs, the accelerator is faked */
static void accelerator_done(void);
void MXC_LP_EnterSleepMode(void) { if (run_main) accelerator_done(); }
int MXC_Delay(uint32_t us) { (void) us; return 0; }
void SystemCoreClockUpdate(void) {}
void LED_On(unsigned int idx) { (void) idx; }
void __enable_irq(void) {}
void Debug_Init(void) {}
void LED_Off(unsigned int idx) { (void) idx; }

void load_input(void);

#define FIFO_PAGE 0x50000000UL
#define FIFO_DATA_FIRST 0x50000008UL  /* FIFO_REG of FIFO 0; one word per FIFO after it */
#define FIFO_DATA_LAST 0x50000014UL
#define TRAP_FLAG 0x100

static unsigned long quadrant_base[4];
static FILE *fifo_out;
static volatile uintptr_t fifo_pending;  /* address of the FIFO access being single-stepped */
static volatile int fifo_write;

/* An access to the FIFO page: open it and run the one instruction with the trap flag set. */
static void fifo_fault(int sig, siginfo_t *info, void *context)
{
  ucontext_t *uc = context;
  uintptr_t addr = (uintptr_t) info->si_addr;
  (void) sig;
  if (addr < FIFO_PAGE || addr >= FIFO_PAGE + 0x1000) {
    static const char msg[] = "segmentation fault outside the FIFO page\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(6);
    _exit(6);
  }
  fifo_pending = addr;
  fifo_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  mprotect((void *) FIFO_PAGE, 0x1000, PROT_READ | PROT_WRITE);
  uc->uc_mcontext.gregs[REG_EFL] |= TRAP_FLAG;
}

/* After the instruction: record a FIFO data write, close the page again. */
static void fifo_step(int sig, siginfo_t *info, void *context)
{
  ucontext_t *uc = context;
  (void) sig;
  (void) info;
  uintptr_t addr = fifo_pending;
  if (fifo_write && addr >= FIFO_DATA_FIRST && addr <= FIFO_DATA_LAST && fifo_out != NULL) {
    uint32_t pair[2] = { (uint32_t) addr, *(volatile uint32_t *) addr };
    fwrite(pair, sizeof pair, 1, fifo_out);
  }
  mprotect((void *) FIFO_PAGE, 0x1000, PROT_NONE);
  uc->uc_mcontext.gregs[REG_EFL] &= ~TRAP_FLAG;
}

static int quadrants;
static volatile unsigned long ticks, tick_limit;

/* The host's model of the accelerator, called every millisecond: a clear request completes. */
static void hardware_tick(int sig)
{
  (void) sig;
  for (int q = 0; q < quadrants; q++) {
    volatile uint32_t *test = (volatile uint32_t *) (quadrant_base[q] + 0xc);
    if ((*test & (1u << 7)) != 0)
      *test |= 1u << 25;
    for (unsigned bist = 0; bist < 4; bist++)  /* data, mask, TRAM, bias memory */
      if ((*test & (1u << (2 * bist))) != 0)
        *test |= 1u << (18 + bist) | 1u << 27;
  }
  if (++ticks > tick_limit) {
    static const char msg[] = "timed out: the firmware waits for accelerator state the host does not model\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(3);
  }
}

/* The firmware's main with a fake accelerator: the first sleep after cnn_start writes the
 * known answer's words where the output layers write them and calls the done interrupt. */
int cnnforge_firmware_main(void);
void CNN_ISR(void) __attribute__((weak));
void CNN_IRQHandler(void) __attribute__((weak));

static void accelerator_done(void)
{
#ifdef SAMPLE_OUTPUT
  static const uint32_t table[] = SAMPLE_OUTPUT;
  const uint32_t *ptr = table;
  volatile uint32_t *addr;
  while ((addr = (volatile uint32_t *) (uintptr_t) *ptr++) != 0) {
    uint32_t mask = *ptr++, len = *ptr++;
    for (uint32_t i = 0; i < len; i++, addr++)
      *addr = (*addr & ~mask) | *ptr++;
  }
#endif
  if (CNN_ISR != NULL) CNN_ISR();
  else if (CNN_IRQHandler != NULL) CNN_IRQHandler();
}

static int dump(const char *path, unsigned long size)
{
  FILE *f = fopen(path, "wb");
  if (f == NULL) return 1;
  mprotect((void *) FIFO_PAGE, 0x1000, PROT_READ | PROT_WRITE);
  const uint32_t *words = (const uint32_t *) CNN_BASE;
  for (unsigned long i = 0; i < size / 4; i++) {
    if (words[i] != 0) {
      uint32_t pair[2] = { (uint32_t) (CNN_BASE + 4 * i), words[i] };
      fwrite(pair, sizeof pair, 1, f);
    }
  }
  mprotect((void *) FIFO_PAGE, 0x1000, PROT_NONE);
  return fclose(f) != 0;
}

int main(int argc, char **argv)
{
  if (argc != 6 && !(argc == 7 && strcmp(argv[6], "main") == 0)) {
    fprintf(stderr, "usage: hostrun SIZE QUADRANT_STRIDE QUADRANT0 OUT_PREFIX WAIT_MS [main]\n");
    return 2;
  }
  unsigned long size = strtoul(argv[1], NULL, 0);
  unsigned long stride = strtoul(argv[2], NULL, 0);
  unsigned long first = strtoul(argv[3], NULL, 0);
  char path[4096];
  void *mem = mmap((void *) CNN_BASE, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
  if (mem != (void *) CNN_BASE) {
    perror("mmap of the CNN address space");
    return 4;
  }
  snprintf(path, sizeof path, "%s.fifo", argv[4]);
  fifo_out = fopen(path, "wb");
  if (fifo_out == NULL) return 5;
  struct sigaction fault = { 0 }, step = { 0 };
  fault.sa_sigaction = fifo_fault;
  fault.sa_flags = SA_SIGINFO;
  step.sa_sigaction = fifo_step;
  step.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &fault, NULL);
  sigaction(SIGTRAP, &step, NULL);
  mprotect((void *) FIFO_PAGE, 0x1000, PROT_NONE);
  quadrants = 4;
  for (int q = 0; q < quadrants; q++) quadrant_base[q] = first + q * stride;
  tick_limit = strtoul(argv[5], NULL, 0);
  signal(SIGALRM, hardware_tick);
  struct itimerval every_ms = { { 0, 1000 }, { 0, 1000 } };
  setitimer(ITIMER_REAL, &every_ms, NULL);
  if (argc == 7) {
    run_main = 1;
    return cnnforge_firmware_main();
  }

  cnn_init();
  cnn_load_weights();
  cnn_load_bias();
  cnn_configure();
  snprintf(path, sizeof path, "%s.state", argv[4]);
  if (dump(path, size)) return 5;
  load_input();
  snprintf(path, sizeof path, "%s.input", argv[4]);
  if (dump(path, size)) return 5;

  if (fclose(fifo_out) != 0) return 5;
  snprintf(path, sizeof path, "%s.kat", argv[4]);
  FILE *f = fopen(path, "wb");
  if (f == NULL) return 5;
#ifdef SAMPLE_OUTPUT
  static const uint32_t kat[] = SAMPLE_OUTPUT;
  fwrite(kat, sizeof kat, 1, f);
#endif
  return fclose(f) != 0 ? 5 : 0;
}
