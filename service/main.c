/*
 * main.c: dpsilod entry point (placeholder until the foundation issue lands the daemon).
 */
#include <stdio.h>

int main(void)
{
    puts("dpsilod: not built yet");
    return 1;
}
