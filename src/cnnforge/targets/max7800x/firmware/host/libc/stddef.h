/* cnnforge: stand-in <stddef.h> for reading a firmware folder with pycparser (never compiled). */
#ifndef CNNFORGE_FAKE_STDDEF_H
#define CNNFORGE_FAKE_STDDEF_H
#include <stdint.h>
typedef unsigned long size_t;
typedef int bool;
#endif
