/* cnnforge: stand-in <stdlib.h> for reading a firmware folder with pycparser (never compiled). */
#include <stddef.h>
