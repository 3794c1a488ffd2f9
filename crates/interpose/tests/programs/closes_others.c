/* A program that closes descriptors it did not open, as daemons and some launchers do.
   Usage: closes_others DIR MODE, MODE one of:
     loop        close(fd) for every fd from 3 to 1023 but its own;
     range       close_range(3, ~0U, 0) after opening its file;
     dup2        dup2(its file, n) onto every n from 3 to 1023 but its own;
     stale       opens a.bin, closes it past libc (the raw system call), then makes a pipe
                 that may get the same number and moves 6 bytes through it.
   Then it opens DIR/after.bin, writes "abcd" and keeps it open until it exits, reads
   DIR/input.bin (5 bytes) and exits 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void check(int ok, const char *what) {
    if (!ok) { perror(what); exit(2); }
}

int main(int argc, char **argv) {
    char after[4096], input[4096], a[4096];
    snprintf(after, sizeof after, "%s/after.bin", argv[1]);
    snprintf(input, sizeof input, "%s/input.bin", argv[1]);
    snprintf(a, sizeof a, "%s/a.bin", argv[1]);
    const char *mode = argv[2];
    char buf[16];
    int in = open(input, O_RDONLY);
    /* The program's first descriptor is 3, as it would be untraced. */
    check(in == 3, "open input gets descriptor 3");
    check(read(in, buf, 2) == 2, "read 2");  /* traced before the closes */
    if (strcmp(mode, "loop") == 0) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != in) close(fd);
    } else if (strcmp(mode, "range") == 0) {
        check(close_range(in + 1, ~0U, 0) == 0, "close_range");
    } else if (strcmp(mode, "dup2") == 0) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != in) check(dup2(in, fd) == fd, "dup2 onto a number");
        for (int fd = 3; fd < 1024; fd++)
            if (fd != in) close(fd);
    } else if (strcmp(mode, "stale") == 0) {
        int fa = open(a, O_RDONLY);
        check(fa >= 0, "open a");
        check(read(fa, buf, 1) == 1, "read a");
        syscall(SYS_close, fa);
        int p[2];
        check(pipe(p) == 0, "pipe");
        check(write(p[1], "piped!", 6) == 6, "write pipe");
        check(read(p[0], buf, 6) == 6, "read pipe");
        close(p[0]);
        close(p[1]);
    }
    int out = open(after, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    check(out >= 0, "open after");
    check(write(out, "abcd", 4) == 4, "write after");
    check(read(in, buf, 3) == 3, "read 3");   /* offset 2 */
    return 0;  /* after.bin stays open until exit, when the trace is written */
}
