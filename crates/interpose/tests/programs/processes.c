/* Threads, fork and exec. Usage: processes DIR CAT.
   Four threads each read DIR/t<i>.bin (1000 * (i + 1) bytes); a forked child reads
   DIR/child.bin (777 bytes) and then execs (execv) CAT on DIR/exec.bin (555 bytes). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;

static void make(const char *name, int size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < size; i++) fputc(i % 7, f);
    fclose(f);
}

static long read_all(const char *name) {
    char path[4096], buf[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); exit(2); }
    long total = 0, n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
    close(fd);
    return total;
}

static void *reader(void *arg) {
    char name[32];
    snprintf(name, sizeof name, "t%ld.bin", (long)arg);
    if (read_all(name) != 1000 * ((long)arg + 1)) exit(3);
    return NULL;
}

int main(int argc, char **argv) {
    dir = argv[1];
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d.bin", i);
        make(name, 1000 * (i + 1));
    }
    make("child.bin", 777);
    make("exec.bin", 555);
    pthread_t threads[4];
    for (long i = 0; i < 4; i++) pthread_create(&threads[i], NULL, reader, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    pid_t child = fork();
    if (child == 0) {
        if (read_all("child.bin") != 777) _exit(4);
        char path[4096];
        snprintf(path, sizeof path, "%s/exec.bin", dir);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        char *args[] = {argv[2], path, NULL};
        execv(argv[2], args);
        _exit(5);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 6;
}
