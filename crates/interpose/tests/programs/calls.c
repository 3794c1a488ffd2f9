/* Every hooked call once, with sizes and offsets the test knows.
   Usage: calls DIR. Writes DIR/data.bin (10000 bytes), reads it back through each call,
   writes DIR/out.bin, and reads a FIFO that a forked child fills after 300 ms. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void check(int ok, const char *what) {
    if (!ok) { perror(what); exit(2); }
}

int main(int argc, char **argv) {
    char data[4096], out[4096], fifo[4096];
    snprintf(data, sizeof data, "%s/data.bin", argv[1]);
    snprintf(out, sizeof out, "%s/out.bin", argv[1]);
    snprintf(fifo, sizeof fifo, "%s/slow.fifo", argv[1]);
    static char buf[10000];
    for (int i = 0; i < 10000; i++) buf[i] = (char)(i % 251);

    int fd = open(data, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    check(fd >= 0, "open for writing");
    check(write(fd, buf, 10000) == 10000, "write");
    check(close(fd) == 0, "close");

    fd = open(data, O_RDONLY);
    check(fd >= 0, "open");
    check(read(fd, buf, 100) == 100, "read 100");          /* offset 0 */
    check(read(fd, buf, 200) == 200, "read 200");          /* offset 100 */
    check(lseek(fd, 5000, SEEK_SET) == 5000, "lseek");
    check(read(fd, buf, 50) == 50, "read 50");             /* offset 5000 */
    check(pread(fd, buf, 70, 9000) == 70, "pread");        /* offset 9000, position kept */
    check(read(fd, buf, 10) == 10, "read 10");             /* offset 5050 */
    struct iovec iov[2] = {{buf, 30}, {buf + 100, 40}};
    check(readv(fd, iov, 2) == 70, "readv");               /* offset 5060 */
    check(preadv(fd, iov, 2, 1) == 70, "preadv");          /* offset 1 */
    check(preadv2(fd, iov, 2, 2, 0) == 70, "preadv2");     /* offset 2 (CPython's os.preadv) */
    check(preadv2(fd, iov, 2, -1, 0) == 70, "preadv2 -1"); /* offset 5130, the position */
    check(read(fd, buf, 10000) == 10000 - 5200, "read to the end"); /* offset 5200 */
    struct stat st;
    check(fstat(fd, &st) == 0 && st.st_size == 10000, "fstat");
    void *map = mmap(NULL, 10000, PROT_READ, MAP_PRIVATE, fd, 0);
    check(map != MAP_FAILED, "mmap");
    munmap(map, 10000);
    check(close(fd) == 0, "close");
    check(stat(data, &st) == 0, "stat");

    FILE *f = fopen(data, "rb");
    check(f != NULL, "fopen");
    check(fread(buf, 1, 123, f) == 123, "fread");          /* offset 0 */
    check(fread(buf, 7, 10, f) == 10, "fread 7x10");       /* offset 123 */
    check(fclose(f) == 0, "fclose");

    fd = open(out, O_RDWR | O_CREAT | O_TRUNC, 0644);
    check(fd >= 0, "open out");
    check(pwrite(fd, buf, 10, 4096) == 10, "pwrite");      /* offset 4096 */
    struct iovec wiov[2] = {{buf, 3}, {buf, 5}};
    check(writev(fd, wiov, 2) == 8, "writev");             /* offset 0 */
    check(close(fd) == 0, "close out");

    /* A read that takes 300 ms: the writer opens the FIFO after sleeping. */
    check(mkfifo(fifo, 0600) == 0, "mkfifo");
    pid_t child = fork();
    check(child >= 0, "fork");
    if (child == 0) {
        struct timespec pause = {0, 300 * 1000 * 1000};
        nanosleep(&pause, NULL);
        int w = open(fifo, O_WRONLY);
        check(w >= 0, "child open fifo");
        check(write(w, "hello", 5) == 5, "child write");
        close(w);
        _exit(0);
    }
    int r = open(fifo, O_RDONLY);                          /* waits for the writer */
    check(r >= 0, "open fifo");
    check(read(r, buf, 5) == 5, "read fifo");
    close(r);
    waitpid(child, NULL, 0);

    /* errno is libc's: a close of a descriptor that was never open. */
    errno = 0;
    check(close(4000) == -1 && errno == EBADF, "close(4000) sets EBADF");
    errno = 0;
    check(open("/no/such/dir/file", O_RDONLY) == -1 && errno == ENOENT, "open sets ENOENT");
    return 0;
}
