/* Links dtor_lib, prints, and returns from main. */
#include <stdio.h>

void dtor_lib_linked(void);

int main(void) {
    dtor_lib_linked();
    printf("main done\n");
    return 0;
}
