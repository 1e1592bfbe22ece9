/*
 * A KV-cache owner for the fake-driver tests: creates one memfd per
 * argument "DEV:SIZE", named "fakecuda-devDEV" and SIZE bytes long (the
 * fake libcuda imports such an fd as DEV's memory), prints the fd numbers
 * on one line, lets any process take them with pidfd_getfd
 * (PR_SET_PTRACER_ANY), and waits for a signal.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    for (int i = 1; i < argc; i++) {
        char name[64];
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
        printf("%s%d", i > 1 ? " " : "", fd);
    }
    printf("\n");
    fflush(stdout);
    for (;;) pause();
}
