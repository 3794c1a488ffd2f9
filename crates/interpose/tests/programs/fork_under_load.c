/* Forks while other threads make traced calls. Usage: fork_under_load DIR FORKS.
   Four threads pread DIR/data.bin (64 KiB) in a loop, so that the tracer's locks are taken
   and waited for all the time, while the main thread forks FORKS children one after
   another; each child reads the file once (a traced call) and exits. A child that does not
   exit within 10 s is stuck (a lock the fork copied as held): it is killed and the program
   exits 5. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char path[4096];
static atomic_int running = 1;

static void *reader(void *arg) {
    (void)arg;
    char buf[4096];
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); exit(2); }
    long at = 0;
    while (atomic_load(&running)) {
        if (pread(fd, buf, sizeof buf, at) != (ssize_t)sizeof buf) exit(3);
        at = (at + 4096) % 65536;
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    snprintf(path, sizeof path, "%s/data.bin", argv[1]);
    int forks = atoi(argv[2]);
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 65536; i++) fputc(i % 251, f);
    fclose(f);
    pthread_t threads[4];
    for (long i = 0; i < 4; i++) pthread_create(&threads[i], NULL, reader, (void *)i);
    int stuck = 0;
    for (int i = 0; i < forks && !stuck; i++) {
        pid_t child = fork();
        if (child == 0) {
            char buf[4096];
            int fd = open(path, O_RDONLY);
            if (fd < 0 || pread(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) _exit(4);
            close(fd);
            _exit(0);
        }
        int status = 0;
        struct timespec pause = {0, 1000000};
        for (int waited = 0;; waited++) {
            pid_t done = waitpid(child, &status, WNOHANG);
            if (done == child) break;
            if (waited >= 10000) {
                fprintf(stderr, "child %d of %d stuck after fork\n", i, forks);
                kill(child, SIGKILL);
                waitpid(child, &status, 0);
                stuck = 1;
                break;
            }
            nanosleep(&pause, NULL);
        }
        if (!stuck && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "child %d failed (%d)\n", i, status);
            exit(6);
        }
    }
    atomic_store(&running, 0);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    return stuck ? 5 : 0;
}
