/* cnnforge: stand-in <stdint.h> for reading a firmware folder with pycparser (never compiled). */
#ifndef CNNFORGE_FAKE_STDINT_H
#define CNNFORGE_FAKE_STDINT_H
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long uintptr_t;
typedef long intptr_t;
#endif
