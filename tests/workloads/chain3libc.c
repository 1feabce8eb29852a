// FLAGS: -O2 -fomit-frame-pointer
/* chain3libc K MS [go]: chain3 (see chain3.c) as a distribution builds a
 * program: optimized, without frame pointers, each stage calling glibc
 * (read, write, nanosleep, sem_wait, sem_post). A frame-pointer walk loses
 * the function of each stage that called glibc; DWARF unwinding finds it. */
#define CHAIN3_LIBC
#include "chain3.c"
