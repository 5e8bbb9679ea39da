/* Allocations made on stacks other than a thread's own, as user-level
 * threading libraries and signal handlers make them:
 *   - coroutines from makecontext/swapcontext, on a malloc'd stack and on
 *     an mmap'd stack with a PROT_NONE guard page right above it;
 *   - a stack switch in hand-written assembly whose CFI does not describe
 *     the switch (as in many context-switch libraries), onto a stack with a
 *     guard page right above it: unwinding past the entry function reads
 *     the guard page;
 *   - a signal handler on an alternate stack (sigaltstack).
 * Prints "CALLS <function> <calls> <bytes>" for malloc and free (output
 * through say.h, which does not allocate) and a checksum. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "say.h"

#define ROUNDS 40
#define PER_ROUND 100
#define RAW_CALLS 3000
#define SIGNALS 200
#define PAGE 4096

static unsigned long mallocs, malloc_bytes, frees, checksum;
static void *volatile keep;

static void counted_malloc_free(size_t n) {
    char *p = malloc(n);
    if (!p) abort();
    keep = p;
    p[0] = (char)n;
    checksum += (unsigned char)p[0];
    mallocs++;
    malloc_bytes += n;
    free(keep);
    frees++;
}

/* ---- makecontext coroutines ---- */
static ucontext_t main_ctx, co_ctx[2];

__attribute__((noinline)) void coro_alloc(int k) {
    for (int i = 0; i < PER_ROUND; i++) counted_malloc_free(24 + (size_t)k);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void coro_body(int k) {
    for (int r = 0; r < ROUNDS; r++) {
        coro_alloc(k);
        swapcontext(&co_ctx[k], &main_ctx);
    }
}

/* n pages, the last one PROT_NONE: a stack whose top is right below a
 * guard page. Returns the stack's base; its top is base + (n - 1) pages. */
static char *guarded_stack(size_t n) {
    char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + (n - 1) * PAGE, PAGE, PROT_NONE) != 0) abort();
    return p;
}

static void coroutines(void) {
    size_t heap_size = 64 * 1024;
    char *heap_stack = malloc(heap_size);
    if (!heap_stack) abort();
    mallocs++;
    malloc_bytes += heap_size;
    char *mapped = guarded_stack(17);
    for (int k = 0; k < 2; k++) {
        getcontext(&co_ctx[k]);
        co_ctx[k].uc_stack.ss_sp = k == 0 ? heap_stack : mapped;
        co_ctx[k].uc_stack.ss_size = k == 0 ? heap_size : 16 * PAGE;
        co_ctx[k].uc_link = &main_ctx;
        makecontext(&co_ctx[k], (void (*)(void))coro_body, 1, k);
    }
    for (int r = 0; r <= ROUNDS; r++)
        for (int k = 0; k < 2; k++) swapcontext(&main_ctx, &co_ctx[k]);
    free(heap_stack);
    frees++;
    munmap(mapped, 17 * PAGE);
}

/* ---- a stack switch in assembly ---- */
/* run_on_stack(top, fn): calls fn on the stack that ends at top and comes
 * back. Its CFI claims CFA = rsp + 8 throughout, which is wrong after the
 * switch: an unwinder that trusts it reads the word at `top`. */
void run_on_stack(void *top, void (*fn)(void));
__asm__(".text\n"
        ".globl run_on_stack\n"
        ".type run_on_stack,@function\n"
        "run_on_stack:\n"
        ".cfi_startproc\n"
        "  push %rbp\n"
        "  push %rbx\n"
        "  mov %rsp, %rbx\n"
        "  mov %rdi, %rsp\n"
        "  call *%rsi\n"
        "  mov %rbx, %rsp\n"
        "  pop %rbx\n"
        "  pop %rbp\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size run_on_stack, .-run_on_stack\n");

__attribute__((noinline)) void raw_alloc(void) {
    for (int i = 0; i < RAW_CALLS; i++) counted_malloc_free(48);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void on_raw_stack(void) {
    raw_alloc();
    __asm__ volatile("" ::: "memory");
}

static void raw_switch(void) {
    char *s = guarded_stack(9);
    run_on_stack(s + 8 * PAGE, on_raw_stack);
    munmap(s, 9 * PAGE);
}

/* ---- a handler on an alternate signal stack ---- */
static volatile sig_atomic_t handled;

__attribute__((noinline)) void alt_handler(int sig) {
    (void)sig;
    counted_malloc_free(72);
    handled++;
}

static void alternate_stack(void) {
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_size = 16 * PAGE;
    ss.ss_sp = guarded_stack(17);
    if (sigaltstack(&ss, NULL) != 0) abort();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = alt_handler;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) abort();
    for (int i = 0; i < SIGNALS; i++) raise(SIGUSR1);
    if (handled != SIGNALS) abort();
}

__attribute__((noinline)) void main_alloc(void) {
    for (int i = 0; i < 500; i++) counted_malloc_free(16);
}

int main(void) {
    main_alloc();
    coroutines();
    raw_switch();
    alternate_stack();
    main_alloc();
    say("CALLS malloc %lu %lu\n", mallocs, malloc_bytes);
    say("CALLS free %lu 0\n", frees);
    say("checksum %lu\n", checksum);
    return say_flush() == 0 ? 0 : 1;
}
