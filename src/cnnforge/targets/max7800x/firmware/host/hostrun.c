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
 * With "unload MLAT0 WPTR0 LCTL2_0 SRAM0" (quadrant 0's mlator register, layer 0's write pointer
 * base and LCTL2, data memory; the others a quadrant stride apart) the known answer is written
 * where the output layers write it and cnn_unload runs: the pages of those registers and of CTL
 * are kept inaccessible the same way, every access to them is appended to OUT.trace as (0 write /
 * 1 read, address, value), and out_buf (CNN_NUM_OUTPUTS words) goes to OUT.unload. A read of a
 * mlator register is answered by the model of mlator_read (docs/firmware.md, --mlator).
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
static volatile uintptr_t fifo_pending;  /* address of the access being single-stepped */
static volatile int fifo_write;
static volatile uintptr_t open_page;  /* its page, opened for the one instruction */

/* "unload": the traced register pages, the trace, and the model of the mlator registers */
#define MAX_TRAPS 16
static uintptr_t trap_page[MAX_TRAPS];
static int traps;
static FILE *trace_out;
static uintptr_t mlat_addr[4], wptr_addr[4], sram_addr[4];
static uint32_t ctl_now[4], wptr_now[4], mlat_ptr[4];
static int mlat_armed[4];

static int traced(uintptr_t page)
{
  for (int i = 0; i < traps; i++)
    if (trap_page[i] == page) return 1;
  return 0;
}

/* A read of quadrant q's mlator register. CTL bit 16 (set by the last CTL write) turns the
 * mlator on; the first read after a CTL write that sets it primes: it loads the pointer from
 * layer 0's write pointer base (a word index into the quadrant's first data-memory instance)
 * and returns 0. Each further read returns byte lane CTL[18:17] of the four words from the
 * pointer, the first word's in bits 0-7, and advances the pointer by four words. Off: 0. */
static uint32_t mlator_read(int q)
{
  uint32_t ctl = ctl_now[q];
  if ((ctl & (1u << 16)) == 0) return 0;
  if (mlat_armed[q]) {
    mlat_armed[q] = 0;
    mlat_ptr[q] = wptr_now[q];
    return 0;
  }
  unsigned lane = (ctl >> 17) & 3;
  uint32_t value = 0;
  for (unsigned i = 0; i < 4; i++) {
    uint32_t word = *(volatile uint32_t *) (sram_addr[q] + 4UL * (mlat_ptr[q] + i));
    value |= ((word >> (8 * lane)) & 0xffu) << (8 * i);
  }
  mlat_ptr[q] += 4;
  return value;
}

/* A write to a traced register: what the mlator model remembers of it. */
static void register_written(uintptr_t addr, uint32_t value)
{
  for (int q = 0; q < 4; q++) {
    if (addr == quadrant_base[q]) {
      ctl_now[q] = value;
      mlat_armed[q] = (value & (1u << 16)) != 0;
    }
    if (addr == wptr_addr[q]) wptr_now[q] = value;
  }
}

/* An access to the FIFO page or a traced page: open it (a read of a mlator register gets the
 * model's value first) and run the one instruction with the trap flag set. */
static void fifo_fault(int sig, siginfo_t *info, void *context)
{
  ucontext_t *uc = context;
  uintptr_t addr = (uintptr_t) info->si_addr;
  uintptr_t page = addr & ~0xfffUL;
  (void) sig;
  if (page != FIFO_PAGE && !traced(page)) {
    static const char msg[] = "segmentation fault outside the FIFO and traced pages\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(6);
    _exit(6);
  }
  fifo_pending = addr;
  fifo_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  open_page = page;
  mprotect((void *) page, 0x1000, PROT_READ | PROT_WRITE);
  for (int q = 0; q < 4 && !fifo_write; q++)
    if (mlat_addr[q] != 0 && addr == mlat_addr[q])
      *(volatile uint32_t *) addr = mlator_read(q);
  uc->uc_mcontext.gregs[REG_EFL] |= TRAP_FLAG;
}

/* After the instruction: record a FIFO data write or a traced access, close the page again. */
static void fifo_step(int sig, siginfo_t *info, void *context)
{
  ucontext_t *uc = context;
  (void) sig;
  (void) info;
  uintptr_t addr = fifo_pending;
  uint32_t value = *(volatile uint32_t *) addr;
  if (open_page == FIFO_PAGE) {
    if (fifo_write && addr >= FIFO_DATA_FIRST && addr <= FIFO_DATA_LAST && fifo_out != NULL) {
      uint32_t pair[2] = { (uint32_t) addr, value };
      fwrite(pair, sizeof pair, 1, fifo_out);
    }
  } else if (trace_out != NULL) {
    uint32_t row[3] = { fifo_write ? 0u : 1u, (uint32_t) addr, value };
    fwrite(row, sizeof row, 1, trace_out);
    if (fifo_write) register_written(addr, value);
  }
  mprotect((void *) open_page, 0x1000, PROT_NONE);
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
int cnn_unload(uint32_t *out_buf) __attribute__((weak)); /* absent with --no-unload */

static void write_known_answer(void)
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
}

static void accelerator_done(void)
{
  write_known_answer();
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

/* "unload": the known answer in memory, then cnn_unload with the register pages traced. */
static int run_unload(char **argv, unsigned long stride)
{
#ifdef CNN_NUM_OUTPUTS
  static uint32_t out_buf[CNN_NUM_OUTPUTS];
  char path[4096];
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer(ITIMER_REAL, &off, NULL);  /* no clock tick touches a traced page */
  if (cnn_unload == NULL) return 2;
  write_known_answer();
  snprintf(path, sizeof path, "%s.trace", argv[4]);
  trace_out = fopen(path, "wb");
  if (trace_out == NULL) return 5;
  for (int q = 0; q < quadrants; q++) {
    mlat_addr[q] = strtoul(argv[7], NULL, 0) + q * stride;
    wptr_addr[q] = strtoul(argv[8], NULL, 0) + q * stride;
    sram_addr[q] = strtoul(argv[10], NULL, 0) + q * stride;
    uintptr_t pages[4] = { quadrant_base[q], mlat_addr[q], wptr_addr[q],
                           strtoul(argv[9], NULL, 0) + q * stride };
    for (int i = 0; i < 4; i++)
      if (!traced(pages[i] & ~0xfffUL) && traps < MAX_TRAPS)
        trap_page[traps++] = pages[i] & ~0xfffUL;
  }
  for (int i = 0; i < traps; i++) mprotect((void *) trap_page[i], 0x1000, PROT_NONE);
  cnn_unload(out_buf);
  for (int i = 0; i < traps; i++) mprotect((void *) trap_page[i], 0x1000, PROT_READ | PROT_WRITE);
  if (fclose(trace_out) != 0) return 5;
  trace_out = NULL;
  snprintf(path, sizeof path, "%s.unload", argv[4]);
  FILE *u = fopen(path, "wb");
  if (u == NULL) return 5;
  fwrite(out_buf, sizeof out_buf, 1, u);
  return fclose(u) != 0 ? 5 : 0;
#else
  (void) argv;
  (void) stride;
  return 2;  /* a folder without cnn.h's CNN_NUM_OUTPUTS (the harness's own minimal ones) */
#endif
}

int main(int argc, char **argv)
{
  int unload = argc == 11 && strcmp(argv[6], "unload") == 0;
  if (argc != 6 && !(argc == 7 && strcmp(argv[6], "main") == 0) && !unload) {
    fprintf(stderr, "usage: hostrun SIZE QUADRANT_STRIDE QUADRANT0 OUT_PREFIX WAIT_MS "
            "[main | unload MLAT0 WPTR0 LCTL2_0 SRAM0]\n");
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
  if (unload) return run_unload(argv, stride);
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
