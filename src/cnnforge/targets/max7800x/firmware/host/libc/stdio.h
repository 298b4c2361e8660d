/* cnnforge: stand-in <stdio.h> for reading a firmware folder with pycparser (never compiled). */
#include <stddef.h>
