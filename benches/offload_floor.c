/* The floor kvcr offload is measured against (docs/bench.md): a tight
 * walker doing what its default pass must do and nothing more: open each
 * directory relative to its parent (O_RDONLY|O_DIRECTORY|O_NOFOLLOW|
 * O_NOATIME), read it with getdents64 in 32 KiB batches, and one
 * statx(dirfd, name, AT_SYMLINK_NOFOLLOW, TYPE|SIZE|MTIME) per entry,
 * recursing into directories. Prints entries and total bytes.
 * Build: cc -O2 -o offload_floor benches/offload_floor.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static unsigned long long entries, bytes;

static int walk(int dirfd) {
    char buf[32768];
    for (;;) {
        long n = syscall(SYS_getdents64, dirfd, buf, sizeof buf);
        if (n < 0) return -1;
        if (n == 0) return 0;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..")) continue;
            struct statx sx;
            if (statx(dirfd, d->d_name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE | STATX_MTIME, &sx))
                continue;
            entries++;
            bytes += sx.stx_size;
            if (S_ISDIR(sx.stx_mode)) {
                int fd = openat(dirfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC);
                if (fd < 0) fd = openat(dirfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0) {
                    walk(fd);
                    close(fd);
                }
            }
        }
    }
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) { perror(argv[i]); return 2; }
        if (walk(fd)) { perror(argv[i]); return 2; }
        close(fd);
    }
    printf("%llu entries, %llu bytes\n", entries, bytes);
    return 0;
}
