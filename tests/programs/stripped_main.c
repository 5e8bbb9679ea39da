/* Calls into libstripped.so (stripped_lib.c): stripped_api(25), whose
 * static helper allocates. Prints the checksum. */
#include <stdio.h>

long stripped_api(int n);

int main(void) {
    printf("checksum %ld\n", stripped_api(25));
    return 0;
}
