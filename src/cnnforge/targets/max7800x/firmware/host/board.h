/* cnnforge: stand-in for the MSDK header "board.h"; mxc.h (the stand-in) declares LED_On/Off. */
#include "mxc.h"
