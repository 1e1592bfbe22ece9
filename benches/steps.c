/* What each system call of an audit costs on this machine (issue #39).
 *
 * The floors of benches/floor.c time whole reads; this times their steps
 * one by one, and the steps kvcr takes once per run (resolving the root,
 * listing a directory), on one directory DIR and one regular file NAME in
 * it, warm cache, one thread: each step repeated N times (default 100000),
 * fastest of 5 rounds, in ns per call. docs/bench.md "Issue #39: what the
 * targets leave room for" reads it against the floors.
 *
 *   cc -O2 -o /tmp/steps benches/steps.c && /tmp/steps DIR NAME [N]
 *
 * Nothing is written; DIR and NAME are only opened and read.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static long n_iter = 100000;

/* Fastest of 5 rounds of n_iter calls of step(), ns per call. */
static double timed(void (*step)(void), const char *what) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t = now_ns();
        for (long i = 0; i < n_iter; i++)
            step();
        double per = (now_ns() - t) / n_iter;
        if (per < best)
            best = per;
    }
    printf("%-58s %8.0f ns\n", what, best);
    return best;
}

static const char *dir_path, *name;
static int dir_fd, proc_fd, file_fd;
static char buf[1 << 20];

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void s_realpath(void) { free(realpath(dir_path, NULL)); }
static void s_lstat_path(void) {
    struct stat st;
    if (lstat(dir_path, &st)) die("lstat");
}
static void s_open_dir_path(void) {
    int fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) die("open dir");
    close(fd);
}
static void s_list_path(void) {
    DIR *d = opendir(dir_path);
    if (!d) die("opendir");
    while (readdir(d))
        ;
    closedir(d);
}
static void s_list_fd(void) {
    lseek(dir_fd, 0, SEEK_SET);
    while (syscall(SYS_getdents64, dir_fd, buf, sizeof buf) > 0)
        ;
}
static void s_opath(void) {
    int fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) die("openat O_PATH");
    close(fd);
}
static void s_openat2(void) {
    struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    int fd = syscall(SYS_openat2, dir_fd, name, &how, sizeof how);
    if (fd < 0) die("openat2");
    close(fd);
}
static void s_fstat(void) {
    struct stat st;
    if (fstat(file_fd, &st)) die("fstat");
}
static char fd_name[16];
static void s_reopen(void) {
    int fd = openat(proc_fd, fd_name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) die("reopen");
    close(fd);
}
static void s_pread(void) {
    if (pread(file_fd, buf, sizeof buf, 0) < 0) die("pread");
}
static void s_plain(void) {
    int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) die("openat");
    if (read(fd, buf, sizeof buf) < 0) die("read");
    close(fd);
}
static void s_rule(void) {
    struct stat st;
    char nm[16];
    int p = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (p < 0 || fstat(p, &st) || !S_ISREG(st.st_mode)) die("O_PATH open");
    snprintf(nm, sizeof nm, "%d", p);
    int fd = openat(proc_fd, nm, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) die("reopen");
    close(p);
    if (read(fd, buf, sizeof buf) < 0) die("read");
    close(fd);
}
static void s_getpid(void) { syscall(SYS_getpid); }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR NAME [N]\n", argv[0]);
        return 2;
    }
    dir_path = argv[1];
    name = argv[2];
    if (argc > 3)
        n_iter = atol(argv[3]);
    dir_fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    proc_fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0 || proc_fd < 0) die("open");
    file_fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (file_fd < 0) die(name);
    snprintf(fd_name, sizeof fd_name, "%d", file_fd);
    printf("%s, %s, %ld calls a round\n", dir_path, name, n_iter);
    puts("once a run:");
    timed(s_realpath, "  realpath(DIR) (a readlink per component)");
    timed(s_lstat_path, "  lstat(DIR) by path");
    timed(s_open_dir_path, "  open(DIR, O_DIRECTORY) by path + close");
    timed(s_list_path, "  opendir(DIR) + readdir to the end + closedir");
    timed(s_list_fd, "  getdents64 of a held DIR fd (lseek + list)");
    puts("once a file:");
    double a = timed(s_opath, "  openat(DIR fd, NAME, O_PATH|O_NOFOLLOW) + close");
    double b = timed(s_openat2, "  openat2(.., O_PATH, RESOLVE_BENEATH|NO_SYMLINKS|..) + close");
    timed(s_fstat, "  fstat");
    timed(s_reopen, "  reopen through /proc/self/fd + close");
    timed(s_pread, "  pread of the whole file");
    double plain = timed(s_plain, "  plain floor: openat + read + close");
    double rule = timed(s_rule, "  §2.3 floor: O_PATH, fstat, reopen, read, 2 closes");
    timed(s_getpid, "  getpid");
    printf("openat2 over openat: %+.0f ns; §2.3 over plain: %.2fx\n", b - a, rule / plain);
    return 0;
}
