/*
 * A KV-cache owner for the fake-driver tests: creates one memfd per
 * argument "DEV:SIZE", named "fakecuda-devDEV" and SIZE bytes long (the
 * fake libcuda imports such an fd as DEV's memory), prints the fd numbers
 * on one line, lets any process take them with pidfd_getfd
 * (PR_SET_PTRACER_ANY), and waits for a signal. An argument "dup:K"
 * instead prints a dup() of the Kth (0-based) fd: two fds of one file.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    int fds[256];
    for (int i = 1; i < argc && i < 256; i++) {
        char name[64];
        if (!strncmp(argv[i], "dup:", 4)) {
            int k = atoi(argv[i] + 4);
            fds[i - 1] = (k >= 0 && k < i - 1) ? dup(fds[k]) : -1;
            if (fds[i - 1] < 0) {
                perror("owner: dup");
                return 1;
            }
            printf("%s%d", i > 1 ? " " : "", fds[i - 1]);
            continue;
        }
        int dev = atoi(argv[i]);
        const char *colon = argv[i];
        while (*colon && *colon != ':') colon++;
        long long size = *colon ? atoll(colon + 1) : 0;
        snprintf(name, sizeof name, "fakecuda-dev%d", dev);
        int fd = memfd_create(name, 0);
        if (fd < 0 || ftruncate(fd, size) != 0) {
            perror("owner: memfd");
            return 1;
        }
        fds[i - 1] = fd;
        printf("%s%d", i > 1 ? " " : "", fd);
    }
    printf("\n");
    fflush(stdout);
    for (;;) pause();
}
