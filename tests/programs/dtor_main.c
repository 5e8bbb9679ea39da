/* Links dtor_lib, prints, and returns from main. An argument names what
 * the library's destructor does last: fflush, fcloseall or _exit. */
#include <stdio.h>

void dtor_lib_linked(const char *end);

int main(int argc, char **argv) {
    dtor_lib_linked(argc > 1 ? argv[1] : "");
    printf("main done\n");
    return 0;
}
