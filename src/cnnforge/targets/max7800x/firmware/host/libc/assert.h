/* cnnforge: stand-in <assert.h> for reading a firmware folder with pycparser (never compiled). */
#ifndef CNNFORGE_FAKE_ASSERT_H
#define CNNFORGE_FAKE_ASSERT_H
#define assert(x) ((void) 0)
#endif
